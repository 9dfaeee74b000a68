"""The order connections: a dead keep-alive connection is replaced before anything is written on
it, a broken one makes the order ambiguous (never re-sent), and a cancelled order's connection is
never reused."""

from __future__ import annotations

import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import replace as _replace
from typing import Any

import pytest
import trio
import trio.testing

import executor.exchange.orders.connection as order_connection
from executor.config.risk_limits import RiskLimits
from executor.config.settings import ExchangeSettings, Settings
from executor.config.sizing import SizingConfig
from executor.exchange.messages import ExchangeAmbiguous, OrderSpec, OrderStamps, order_body
from executor.exchange.orders.transport import ExchangeEndpoint, open_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault
from executor.signer import KalshiSigner
from executor.trading.exchange_side import order_connections
from tests.support.inprocess import fake_endpoint

WAIT_S = 20.0


def _body(number: int) -> bytes:
    return order_body(
        OrderSpec(
            ticker="KXTEST",
            client_order_id=f"{number:032x}",
            side="bid",
            count=1,
            price="0.4200",
            time_in_force="fill_or_kill",
            self_trade_prevention_type="taker_at_cross",
            exchange_index=0,
        )
    )


def _orders(exchange: FakeExchange) -> list[Any]:
    return [r for r in exchange.received if r.path.endswith("/events/orders")]


async def test_a_connection_the_exchange_closed_between_orders_is_replaced_without_a_retry(
    nursery: trio.Nursery, fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The exchange ends the idle keep-alive connection after order 1: order 2 finds it dead
    before writing and goes out once, on a fresh connection."""
    fake_exchange.inject(Fault("close"))
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, order_connections=1) as client:
            await client.place_order(_body(1), OrderStamps(), dry_run=False)
            await trio.testing.wait_all_tasks_blocked()  # the fake has closed its end
            assert fake_exchange.connections_closed == 1
            second = OrderStamps()
            response = await client.place_order(_body(2), second, dry_run=False)
            assert client.orders.found_dead == 1
    first, again = _orders(fake_exchange)
    assert (first.status, again.status) == (201, 201)
    assert first.connection != again.connection
    assert second.attempts == 1 and response["client_order_id"] == f"{2:032x}"


async def _resetting_server(
    credentials: FakeCredentials, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """A TLS server that reads part of one request, then resets the connection (RST)."""
    context = await trio.to_thread.run_sync(credentials.server_context)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def reset_after_a_little(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, context, server_side=True)
        await tls.receive_some(100)  # the handshake, then the first bytes of the request
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        stream.socket.close()

    await trio.serve_listeners(reset_after_a_little, listeners)


async def test_a_reset_mid_request_leaves_the_order_ambiguous_and_unsent_again(
    nursery: trio.Nursery, fake_credentials: FakeCredentials
) -> None:
    """A reset while the exchange is reading the request raises ExchangeAmbiguous after one
    attempt, though connection errors are otherwise retried."""
    port = await nursery.start(_resetting_server, fake_credentials)
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    endpoint = ExchangeEndpoint(
        f"https://127.0.0.1:{port}", fake_credentials.key_id, signer, fake_credentials.ca_file
    )
    stamps = OrderStamps()
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
            with pytest.raises(ExchangeAmbiguous, match="after the order was sent"):
                await client.place_order(_body(1), stamps, dry_run=False)
            assert client.orders.idle == 0  # the broken connection did not go back
    assert stamps.attempts == 1
    assert stamps.wire_ns is not None and stamps.ack_ns is None


WaitFunction = Callable[[Any], Awaitable[None]]


def _cancelling(
    real: WaitFunction, counter: list[int], scope: list[trio.CancelScope]
) -> WaitFunction:
    """``real``, counting calls; call number ``counter[1]`` cancels the order's scope first."""

    async def wait(resource: Any) -> None:
        counter[0] += 1
        if counter[0] == counter[1] and scope:
            scope[0].cancel()
        await real(resource)

    return wait


async def test_cancellation_at_every_wait_never_reuses_the_connection(
    monkeypatch: pytest.MonkeyPatch, fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Cancelled at each of the transport's waits in turn (the handshake's, the write's, the
    response's), the order's connection is closed, and the next order goes out whole on another."""
    counter = [0, 0]  # calls so far, call that cancels
    scope: list[trio.CancelScope] = []
    monkeypatch.setattr(
        order_connection,
        "wait_readable",
        _cancelling(trio.lowlevel.wait_readable, counter, scope),
    )
    monkeypatch.setattr(
        order_connection,
        "wait_writable",
        _cancelling(trio.lowlevel.wait_writable, counter, scope),
    )
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S):
        # An uncancelled order on a connection opened on demand: how many waits there are.
        async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
            await client.place_order(_body(0), OrderStamps(), dry_run=False)
    waits = counter[0]
    assert waits >= 2, waits  # at least one in the handshake and one for the response
    for cancel_at in range(1, waits + 1):
        counter[:] = [0, cancel_at]
        with trio.fail_after(WAIT_S):
            async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
                with trio.CancelScope() as order_scope:
                    scope[:] = [order_scope]
                    await client.place_order(_body(cancel_at), OrderStamps(), dry_run=False)
                assert order_scope.cancelled_caught, f"wait {cancel_at} of {waits} not reached"
                assert client.orders.idle == 0  # closed, not given back
                scope.clear()
                stamps = OrderStamps()
                response = await client.place_order(_body(1000 + cancel_at), stamps, dry_run=False)
                assert client.orders.opened == 2
        assert response["client_order_id"] == f"{1000 + cancel_at:032x}"
    # Every request that reached the fake was whole and verified; each cancelled order's
    # connection carried nothing after it.
    by_connection: dict[int, list[Any]] = {}
    for request in _orders(fake_exchange):
        assert request.verified
        by_connection.setdefault(request.connection, []).append(request)
    for requests in by_connection.values():
        assert all(r.status == 201 for r in requests[:-1])


def test_the_pool_is_sized_by_the_risk_gates_in_flight_limit() -> None:
    """One connection per order in flight plus one, never fewer than 3 nor more than 8."""
    base = Settings(ExchangeSettings(mode="fake"), SizingConfig(), True, RiskLimits(), frozenset())
    assert order_connections(base) == 3  # the default limit of 2, plus one
    wide = _replace(base, risk_limits=RiskLimits(max_concurrent_dispatches=5))
    assert order_connections(wide) == 6
    huge = _replace(base, risk_limits=RiskLimits(max_concurrent_dispatches=10**9))
    assert order_connections(huge) == 8
    assert order_connections(_replace(base, risk_enabled=False)) == 3
