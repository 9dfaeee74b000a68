"""The stream client's connection to the fake exchange's served stream (real TLS, a real
WebSocket): how a routine disconnect is logged, and two tasks catching up at once.

``serve_stream`` runs against the fake's stream (``executor.fake.stream``); nothing of the
connection is patched, so what the nurseries inside it raise is what the real code sees.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.messages import USER_DATA_TIMESTAMP_PATH, ExchangeError
from executor.exchange.rest import tls_context
from executor.exchange.stream import client as stream_client
from executor.exchange.stream.client import (
    StreamEndpoint,
    serve_stream,
    stream_url_of,
)
from executor.exchange.stream.orders import StreamedOrders
from executor.exchange.stream.state import StreamState
from executor.fake.book.orders import iso_time
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.rows import LatencyRow, OrderRow, OrderStatus
from executor.signer import KalshiSigner
from tests.fake.test_fake_stream import resting_order
from tests.support.orders import TICKER
from tests.support.rows import order_row

WAIT_S = 20.0
"""Hang guard for one step (seconds), never a speed claim."""


@dataclass
class GatedRows:
    """Order rows kept; while ``held``, each write waits for :attr:`release` (a slow sink)."""

    rows: list[OrderRow] = field(default_factory=list)
    held: bool = False
    release: trio.Event = field(default_factory=trio.Event)
    writing: trio.Event = field(default_factory=trio.Event)
    written: trio.Event = field(default_factory=trio.Event)
    latency: list[LatencyRow] = field(default_factory=list)

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        self.writing.set()
        if self.held:
            await self.release.wait()
        self.rows.append(row)
        self.written.set()
        self.written = trio.Event()

    def record(self, row: LatencyRow) -> None:
        self.latency.append(row)

    refusing: bool = False
    """Lookups are refused (503) while set; otherwise the order is not listed (and the data
    timestamp is old, so it is not known absent either)."""

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        if self.refusing:
            raise ExchangeError("503 service_unavailable: busy", status=503)
        if path == USER_DATA_TIMESTAMP_PATH:
            return {"as_of_time": iso_time(0)}
        return {"orders": [], "cursor": ""}


def placed(exchange: FakeExchange, client_order_id: str) -> OrderRow:
    """Place a resting three-contract order on the fake; its row as answered without the
    exchange's id (so the stream's ``user_order`` of it is news)."""
    resting_order(exchange, client_order_id)
    return order_row(
        client_order_id=client_order_id,
        ticker=TICKER,
        time_in_force="good_till_canceled",
        post_only=1,
        status=OrderStatus.ACCEPTED,
        fill_count="0.00",
        remaining_count="3.00",
    )


@asynccontextmanager
async def streaming(
    exchange: FakeExchange,
    credentials: FakeCredentials,
    sink: GatedRows,
    following: tuple[OrderRow, ...] = (),
) -> AsyncIterator[tuple[StreamedOrders, StreamState]]:
    """``serve_stream`` on the fake's stream (``following`` those orders), connected and trusted;
    cancelled on exit."""
    context = await trio.to_thread.run_sync(tls_context, credentials.ca_file)
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)
    endpoint = StreamEndpoint(
        stream_url_of(exchange.base_url), credentials.key_id, signer.sign, context
    )
    reconciler = Reconciler(sink, sink)
    for row in following:
        reconciler.follow(row)
    orders = StreamedOrders(reconciler, sink)
    state = StreamState()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_stream, endpoint, orders, state)
        with trio.fail_after(WAIT_S):
            while not state.connected:
                await state.wait_changed()
        yield orders, state
        nursery.cancel_scope.cancel()


async def test_a_dropped_connection_is_one_reconnect_line_not_a_crash(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The fake cuts the connection (no close frame): the real connection's nurseries raise an
    ExceptionGroup, which is still a routine end: one "stream down" warning, no "exchange
    stream failed" error with a traceback, and the stream comes back."""
    sink = GatedRows()
    with capture_logs() as logs:
        async with streaming(fake_exchange, fake_credentials, sink) as (_, state):
            fake_exchange.stream.drop_connections()
            with trio.fail_after(WAIT_S):
                while state.connects < 2 or not state.connected:
                    await state.wait_changed()
    events = [(entry["log_level"], entry["event"]) for entry in logs]
    assert not [event for event in events if event[0] == "error"], events
    downs = [entry for entry in logs if entry["event"].startswith("exchange stream down")]
    assert len(downs) == 1 and downs[0]["log_level"] == "warning"
    assert "exc_info" not in downs[0]
    assert state.failures == 1


async def test_a_connection_whose_reconciliation_failed_ends_and_is_retried(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The reconnect's lookups are refused: the connection ends untrusted (a warning, no crash)
    and is tried again; once the lookups answer, the stream is up and trusted."""
    sink = GatedRows(refusing=True)
    followed = placed(fake_exchange, "e" * 32)
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:

            async def refuse_twice() -> None:
                with trio.fail_after(WAIT_S):
                    while fake_exchange.stream.sessions_opened < 2:
                        await fake_exchange.stream.wait_changed()
                sink.refusing = False

            nursery.start_soon(refuse_twice)
            async with streaming(fake_exchange, fake_credentials, sink, (followed,)) as (
                orders,
                state,
            ):
                assert orders.trusted and state.failures >= 1
    events = [entry["event"] for entry in logs]
    assert "stream reconciliation failed: the stream is not trusted yet" in events
    assert not [entry for entry in logs if entry["log_level"] == "error"]


async def test_two_stream_tasks_never_catch_up_at_once(
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The keep-alive task's catch-up is held mid-way by a slow row write while the reader's
    catch-up is due too: the second waits its turn, so no kept message is taken twice or looked
    for after it went (a KeyError that ended the connection), and each order's row is written."""
    monkeypatch.setattr(stream_client, "KEEPALIVE_INTERVAL_S", 0.2)
    sink = GatedRows(held=True)
    async with streaming(fake_exchange, fake_credentials, sink) as (orders, state):
        rows = [placed(fake_exchange, name * 32) for name in "ab"]
        with trio.fail_after(WAIT_S):
            await orders.wait([rows[1].client_order_id], WAIT_S)  # both kept, not followed
            assert orders.known(rows[0].client_order_id) is not None
            await trio.testing.wait_all_tasks_blocked(cushion=0.02)  # the reader is idle
            for row in rows:
                orders.reconciler.follow(row)
            await sink.writing.wait()  # a catch-up holds the first order's write
            placed(fake_exchange, "c" * 32)  # the reader's catch-up is due after this one
            await orders.wait(["c" * 32], WAIT_S)
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
            sink.release.set()
            while len(sink.rows) < 2:
                await sink.written.wait()
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert (state.failures, state.connected) == (0, 1)
    by_order = {row.client_order_id: row for row in sink.rows}
    assert len(sink.rows) == 2 and set(by_order) == {row.client_order_id for row in rows}
    assert all(row.kalshi_order_id is not None for row in sink.rows)
