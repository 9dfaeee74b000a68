"""How a failed order is classified where only a wrong classification would show: a reused
connection that fails before writing, a response the connection cannot read, and the dispatcher's
row for an order whose outcome is unknown (over real TLS against the fake exchange).

Each test was written after its behaviour was broken on purpose and the suite still passed.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import trio

import executor.exchange.orders.response as order_response
import executor.exchange.orders.transport as transport_module
from executor.decide.order_request import FireRequest, OrderTemplate
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.messages import ExchangeAmbiguous, ExchangeError, OrderStamps, order_body
from executor.exchange.orders.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.orders.stages import FireStamps
from executor.exchange.orders.transport import ORDERS_PATH, RetryPolicy, open_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault
from executor.recording.orders.open_orders import load_open_orders, write_corrections
from executor.recording.orders.terms import OUTCOME_UNKNOWN_PREFIX
from executor.recording.rows import OrderRow, OrderStatus
from executor.signer import KalshiSigner
from tests.support.inprocess import fake_endpoint
from tests.support.order_fakes import RecordingSink
from tests.support.orders import TICKER, spec

WAIT_S = 20.0
"""Hang guard for each exchange conversation (not a timing)."""
ONE_ATTEMPT = RetryPolicy(max_attempts=1)
FAST_RETRY = RetryPolicy(base_delay_s=0.001, max_delay_s=0.001)


class SendFails:
    """A TLS socket whose ``send`` fails at once (nothing reaches the kernel); all else is the
    real socket's."""

    def __init__(self, tls: ssl.SSLSocket) -> None:
        self._tls = tls

    def send(self, data: Any) -> int:
        raise ConnectionResetError("send refused before any byte")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tls, name)


async def test_a_reused_connection_that_fails_before_writing_is_not_ambiguous(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Order 1 goes out on the only connection; order 2 takes the same connection, whose send
    fails before any byte: a connection error (retried on a fresh connection, placed once), not
    an order that may have been placed."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, order_connections=1, retry=FAST_RETRY) as client:
            await client.place_order(order_body(spec("1" * 32)), OrderStamps(), dry_run=False)
            used: Any = await client.orders.checkout()
            used._tls = SendFails(used._tls)
            client.orders.checkin(used)
            stamps = OrderStamps()
            response = await client.place_order(order_body(spec("2" * 32)), stamps, dry_run=False)
    assert used.closed
    assert (stamps.attempts, stamps.maybe_placed) == (2, False)
    assert response["client_order_id"] == "2" * 32


async def test_an_oversized_response_is_an_ambiguous_order(
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A response body over the limit (here the fake's ordinary answer, with the limit lowered)
    leaves the order ambiguous, for reconciliation; never a bare parse error, never resent."""
    monkeypatch.setattr(order_response, "MAX_RESPONSE_BYTES", 16)
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    stamps = OrderStamps()
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, retry=FAST_RETRY) as client:
            with pytest.raises(ExchangeAmbiguous, match="over 16 bytes"):
                await client.place_order(order_body(spec()), stamps, dry_run=False)
    assert (stamps.attempts, stamps.maybe_placed) == (1, True)


async def _garbage_server(
    credentials: FakeCredentials, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """A TLS server that reads a request and answers with bytes that are not HTTP."""
    context = await trio.to_thread.run_sync(credentials.server_context)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def answer_garbage(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, context, server_side=True)
        await tls.receive_some(65536)
        await tls.send_all(b"this is not HTTP at all\r\n\r\n")
        await tls.aclose()

    await trio.serve_listeners(answer_garbage, listeners)


async def test_a_malformed_response_is_an_ambiguous_order(
    nursery: trio.Nursery, fake_credentials: FakeCredentials
) -> None:
    """Bytes that are not an HTTP response, after the order was written, leave it ambiguous."""
    port = await nursery.start(_garbage_server, fake_credentials)
    endpoint = transport_module.ExchangeEndpoint(
        f"https://127.0.0.1:{port}",
        fake_credentials.key_id,
        KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id),
        fake_credentials.ca_file,
    )
    stamps = OrderStamps()
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, prewarm=False, retry=ONE_ATTEMPT) as client:
            with pytest.raises(ExchangeAmbiguous, match="after the order was sent"):
                await client.place_order(order_body(spec()), stamps, dry_run=False)
    assert stamps.maybe_placed


def _request(correlation_id: str) -> FireRequest:
    template = OrderTemplate(TICKER, "yes", "bid")
    return FireRequest(template, "0.4200", 3, 0, correlation_id, "", False)


def _resolutions(sink: RecordingSink) -> list[OrderRow]:
    return [row for row in sink.orders if isinstance(row, OrderRow) and row.kind.value != "pending"]


def reread_at_start_up(row: OrderRow, db_path: Path) -> bool:
    """Whether start-up's query of unresolved rows finds ``row`` once it is in a database."""
    write_corrections(db_path, [row])
    found = load_open_orders(db_path, 0)
    return [each.client_order_id for each in found] == [row.client_order_id]


async def test_an_ambiguous_failure_writes_the_marker_start_up_reads_again(
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A timed-out order (no reconciler: nobody asks now) leaves an ``error`` row beginning with
    the outcome-unknown marker, which start-up takes as unresolved."""
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.3)
    fake_exchange.inject(Fault("hang", place=True))
    sink = RecordingSink([])
    with trio.fail_after(WAIT_S):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            dispatcher = OrderDispatcher(client, sink, OrderPolicy())
            with pytest.raises(ExchangeError):
                await dispatcher.dispatch(_request("c-hang"), FireStamps())
    (row,) = _resolutions(sink)
    assert row.status is OrderStatus.ERROR
    assert row.error_message is not None
    assert row.error_message.startswith(OUTCOME_UNKNOWN_PREFIX)
    assert reread_at_start_up(row, tmp_path / "t.db")


async def test_a_definite_refusal_writes_no_marker(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, tmp_path: Path
) -> None:
    """The negative twin: a 400 on the only attempt is a refusal, its row left alone by
    start-up."""
    fake_exchange.inject(Fault("status", status=400))
    sink = RecordingSink([])
    with trio.fail_after(WAIT_S):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            dispatcher = OrderDispatcher(client, sink, OrderPolicy())
            with pytest.raises(ExchangeError):
                await dispatcher.dispatch(_request("c-400"), FireStamps())
    (row,) = _resolutions(sink)
    assert row.error_message is not None
    assert not row.error_message.startswith(OUTCOME_UNKNOWN_PREFIX)
    assert not reread_at_start_up(row, tmp_path / "t.db")


async def test_a_5xx_then_a_refusal_is_still_looked_up(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """503, then 400 on the resend: the dispatcher remembers the first attempt may have placed
    the order, marks the row outcome unknown and asks the exchange about it."""
    fake_exchange.inject(Fault("status", status=503), Fault("status", status=400))
    sink = RecordingSink([])
    with trio.fail_after(WAIT_S):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=FAST_RETRY
        ) as client:
            reconciler = Reconciler(client, sink, delays_s=(0.0, 0.0, 0.0))
            dispatcher = OrderDispatcher(client, sink, OrderPolicy(), reconciler)
            with pytest.raises(ExchangeError):
                await dispatcher.dispatch(_request("c-503-400"), FireStamps())
    first = _resolutions(sink)[0]
    assert first.error_message is not None
    assert first.error_message.startswith(OUTCOME_UNKNOWN_PREFIX + "400")
    assert any(request.path == ORDERS_PATH for request in fake_exchange.received)
