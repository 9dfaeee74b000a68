"""The exchange's stream in a running executor: fills and order updates reach the rows and the
risk gate as the fake publishes them, a lost stream or a lost message is caught by the
reconciliation that follows every reconnect, and a stalled or flooding stream holds up no wake.

The in-process executor trades against the fake over TLS and keeps its WebSocket stream. The
account poll is made to wait an hour after its first poll, so nothing but the stream (and the
reconciliation it starts) can move a resting order's row. Backoffs and order budgets are
shortened (tunables, not the behaviour under test). Deadlines guard against a hang; they are not
speed claims (the stream-to-row lag is in the ``stream_row`` rows). Every message the fake sent
during a test is validated against the published AsyncAPI file when the test ends (this module's
``fake_exchange`` fixture), whatever the test itself checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
import trio

import executor.exchange.follow.account as account_module
import executor.exchange.follow.reconcile as reconcile_module
import executor.exchange.orders.transport as transport_module
import executor.exchange.stream.client as stream_module
from executor.decide.risk import RiskLimits
from executor.exchange.orders.transport import ORDERS_PATH
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault, serve_fake_exchange
from executor.fake.stream_messages import user_order_message
from executor.recording.orders.terms import RECONCILED_PREFIX
from executor.wire.client import connect
from tests.service.test_fire_e2e import query, real_wake, settings_for, start_trading
from tests.support.asyncapi import validate_server_message
from tests.support.inprocess import RunningServer

WAIT_S = 20.0
"""Hang guard for one step (seconds) on a busy 2-core box; never a speed claim."""


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """No account poll after the first; reconnects and lookups at once; orders give up in 0.5 s."""
    monkeypatch.setattr(account_module, "ACCOUNT_POLL_INTERVAL_S", 3600.0)
    monkeypatch.setattr(stream_module, "BACKOFF_FIRST_S", 0.01)
    monkeypatch.setattr(stream_module, "BACKOFF_MAX_S", 0.05)
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(reconcile_module, "RECONCILE_DELAYS_S", (0.0, 0.0, 0.0))


@pytest.fixture
def validated_at_teardown() -> Iterator[list[FakeExchange]]:
    """The fakes of one test; once it has ended, whatever it did, every message their streams
    sent (subscription replies, fills, order updates) must match the published AsyncAPI
    schemas. Synchronous on purpose: pytest-trio runs an async fixture only when a test names
    it, so an autouse one would be skipped silently."""
    exchanges: list[FakeExchange] = []
    yield exchanges
    for exchange in exchanges:
        for message in exchange.stream.sent:
            validate_server_message(message)


@pytest.fixture
async def fake_exchange(
    nursery: trio.Nursery,
    fake_credentials: FakeCredentials,
    validated_at_teardown: list[FakeExchange],
) -> FakeExchange:
    """The shared fixture's fake exchange, its stream's messages validated after the test: no
    test here can forget to check them."""
    exchange: FakeExchange = await nursery.start(serve_fake_exchange, fake_credentials)
    validated_at_teardown.append(exchange)
    return exchange


async def until(condition: Callable[[], bool]) -> None:
    """Wait, bounded, until ``condition`` holds (the executor and the fake have no event for
    these; polled)."""
    with trio.fail_after(WAIT_S):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.01)


def lookups(exchange: FakeExchange) -> int:
    """``GET /portfolio/orders`` requests the fake has received."""
    return sum(request.path == ORDERS_PATH for request in exchange.received)


def status_of(running: RunningServer, correlation_id: str) -> str | None:
    """The status of the order row of ``correlation_id`` (None before it exists)."""
    rows = query(
        running.db_path, "SELECT status FROM orders_fired WHERE correlation_id = ?", correlation_id
    )
    return str(rows[0][0]) if rows else None


async def trading_gtc(
    nursery: trio.Nursery, directory: Path, exchange: FakeExchange, credentials: FakeCredentials
) -> RunningServer:
    """An executor placing good_till_canceled orders, a one-contract position limit, its stream
    up and reconciled."""
    settings = settings_for(
        exchange,
        credentials,
        risk_limits=RiskLimits(max_position_contracts_per_ticker=1),
        time_in_force="good_till_canceled",
    )
    running = await start_trading(nursery, directory, exchange, credentials, settings=settings)
    await until(lambda: running.server.statistics().stream_connected == 1)
    return running


async def rest_one(running: RunningServer, exchange: FakeExchange) -> str:
    """Fire one real wake whose order rests on the fake; its client_order_id once its row says
    ``accepted``."""
    async with connect(running.socket_path) as client:
        await client.request(real_wake("rests"))
    await until(lambda: status_of(running, "rests") == "accepted")
    (client_order_id,) = exchange.book
    return client_order_id


async def gate_refuses_the_other_side(running: RunningServer) -> None:
    """A second one-contract order on the ticker is refused: the gate knows of the first's fill
    (position 1 + 1 > 1)."""
    async with connect(running.socket_path) as client:
        await client.request(real_wake("other-side", direction="no"))
    await until(lambda: status_of(running, "other-side") is not None)
    (reason,) = query(
        running.db_path,
        "SELECT error_message FROM orders_fired WHERE correlation_id = 'other-side'",
    )[0]
    assert "would reach 2 contracts (max 1)" in reason


async def test_a_resting_order_filled_on_the_fake_reaches_its_row_and_the_gate_by_the_stream(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """With no account poll, a maker fill of a resting order turns its row ``filled`` and
    reaches the risk gate through the stream alone: no lookup is made, the fill is counted as
    applied from the stream, and its stream_row lag row is written. The executor answers the
    fake's heartbeat Pings meanwhile."""
    fake_exchange.stream.ping_interval_s = 0.05
    running = await trading_gtc(nursery, short_dir, fake_exchange, fake_credentials)
    client_order_id = await rest_one(running, fake_exchange)
    asked = lookups(fake_exchange)
    fake_exchange.fill_resting(client_order_id)
    await until(lambda: status_of(running, "rests") == "filled")
    await gate_refuses_the_other_side(running)
    stats = running.server.statistics()
    assert stats.stream_fills_applied == 1 and stats.stream_fill_messages == 1
    assert lookups(fake_exchange) == asked  # the stream, not a lookup
    await until(lambda: fake_exchange.stream.pongs_received >= 1)
    await running.shutdown()
    (lag,) = query(
        running.db_path,
        "SELECT duration_ms FROM latency_events WHERE stage = 'stream_row' AND "
        "correlation_id = 'rests'",
    )[0:1][0]
    assert lag >= 0.0
    assert query(
        running.db_path,
        "SELECT fill_count, remaining_count FROM orders_fired WHERE correlation_id = 'rests'",
    ) == [("1.00", "0.00")]


async def test_a_fill_while_the_stream_was_down_is_caught_on_reconnect(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The stream is cut and kept down, the order fills meanwhile (no message can reach the
    executor); once it reconnects, the reconciliation's lookup turns the row ``filled`` and
    tells the risk gate."""
    running = await trading_gtc(nursery, short_dir, fake_exchange, fake_credentials)
    client_order_id = await rest_one(running, fake_exchange)
    fake_exchange.stream.accepting = False
    fake_exchange.stream.drop_connections()
    await until(lambda: running.server.statistics().stream_connected == 0)
    fake_exchange.fill_resting(client_order_id)
    assert fake_exchange.stream.sessions == 0  # nobody to tell
    asked = lookups(fake_exchange)
    fake_exchange.stream.accepting = True
    await until(lambda: status_of(running, "rests") == "filled")
    assert lookups(fake_exchange) > asked
    await gate_refuses_the_other_side(running)
    stats = running.server.statistics()
    assert stats.stream_reconnects >= 1 and stats.stream_fills_applied == 0
    await running.shutdown()


async def test_a_message_the_fake_lost_is_caught_by_the_reconciliation(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The fill's two messages are lost: the row stays ``accepted``; the next reconnect's
    reconciliation turns it ``filled``."""
    running = await trading_gtc(nursery, short_dir, fake_exchange, fake_credentials)
    client_order_id = await rest_one(running, fake_exchange)
    fake_exchange.stream.lose_next("fill")
    fake_exchange.stream.lose_next("user_orders")
    fake_exchange.fill_resting(client_order_id)
    assert len(fake_exchange.stream.lost) == 2
    assert status_of(running, "rests") == "accepted"
    fake_exchange.stream.drop_connections()
    await until(lambda: status_of(running, "rests") == "filled")
    await gate_refuses_the_other_side(running)
    stats = running.server.statistics()
    assert stats.stream_reconnects >= 1 and stats.stream_fills_applied == 0
    await running.shutdown()


async def order_hung_after_placing(
    nursery: trio.Nursery,
    directory: Path,
    exchange: FakeExchange,
    credentials: FakeCredentials,
    *,
    stream: bool,
) -> RunningServer:
    """An executor whose one order the fake places (it fills) and never answers; returns once
    its row is reconciled and written."""
    exchange.inject(Fault("hang", place=True))
    settings = settings_for(exchange, credentials, stream=stream)
    running = await start_trading(nursery, directory, exchange, credentials, settings=settings)
    if stream:
        await until(lambda: running.server.statistics().stream_connected == 1)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("hung"))
    await until(lambda: running.server.statistics().reconciled == 1)
    await until(lambda: status_of(running, "hung") == "filled")
    return running


async def test_an_order_update_resolves_a_waiting_lookup_without_a_list_call(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The order was placed but never answered; the stream's user_order message for it
    resolves the dispatcher's lookup: the row ends ``filled``, reconciled, with no
    ``GET /portfolio/orders`` at all."""
    running = await order_hung_after_placing(
        nursery, short_dir, fake_exchange, fake_credentials, stream=True
    )
    assert lookups(fake_exchange) == 0
    rows = query(running.db_path, "SELECT status, error_message FROM orders_fired")
    assert rows == [("filled", RECONCILED_PREFIX + "no response within 0.5 s")]
    await running.shutdown()


async def test_without_the_stream_the_same_lookup_asks_the_exchange(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The negative twin, with ``--stream off``: the lookup lists orders, and no stream session
    was ever opened."""
    running = await order_hung_after_placing(
        nursery, short_dir, fake_exchange, fake_credentials, stream=False
    )
    assert lookups(fake_exchange) >= 1
    assert fake_exchange.stream.sessions_opened == 0
    assert running.server.statistics().stream_connected == 0
    await running.shutdown()


async def test_a_stalled_stream_holds_up_no_ack_and_no_order(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The fake answers the stream's handshake and then nothing: while the stream waits for its
    subscription, a wake is acked and its order placed and recorded, the stream still stuck in
    the same session."""
    fake_exchange.stream.mute = True
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    await until(lambda: fake_exchange.stream.sessions == 1)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("while-stalled"))
    await until(lambda: status_of(running, "while-stalled") == "filled")
    assert fake_exchange.stream.sessions_opened == 1 and fake_exchange.stream.sessions == 1
    assert running.server.statistics().stream_connected == 0
    await running.shutdown()


async def test_a_flooding_stream_holds_up_no_ack_and_no_order(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Order updates pour in while a wake is acked and its order placed and recorded: the
    executor reads stream messages before, during and after the order, which is not held up."""
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    await until(lambda: running.server.statistics().stream_connected == 1)
    fake_exchange.place_order(
        b'{"ticker":"KXFLOOD","client_order_id":"' + b"f" * 32 + b'","side":"bid",'
        b'"count":"1.00","price":"0.5000","time_in_force":"good_till_canceled",'
        b'"self_trade_prevention_type":"taker_at_cross"}'
    )
    message = user_order_message(fake_exchange.book["f" * 32])
    stop = trio.Event()

    async def flood() -> None:
        published = 0
        while not stop.is_set():
            for _ in range(20):
                fake_exchange.stream.publish("user_orders", message, "KXFLOOD")
            published += 20
            # Paced by what the fake manages to send: at most 200 queued, far below the
            # session's limit, so the flood never gets the executor dropped as too slow.
            while len(fake_exchange.stream.sent) < published - 200 and not stop.is_set():
                await fake_exchange.stream.wait_changed()

    nursery.start_soon(flood)
    await until(lambda: running.server.statistics().stream_order_messages > 100)
    async with connect(running.socket_path) as client:
        before = running.server.statistics().stream_order_messages
        await client.request(real_wake("while-flooded"))
        await until(lambda: status_of(running, "while-flooded") == "filled")
        during = running.server.statistics().stream_order_messages
    stop.set()
    assert during > before  # the flood went on while the order went through
    await running.shutdown()


async def test_on_the_fake_the_engine_clock_offset_is_zero_within_its_bound(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The fake's ts_ms is this host's clock, so the estimated offset of a real order's
    wire_engine / engine_ack rows must be within the bound the rows state: what checks the
    method (the figures on the fake say nothing of Kalshi's clock)."""
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("timed"))
    await until(lambda: status_of(running, "timed") == "filled")
    await running.shutdown()
    rows = query(
        running.db_path,
        "SELECT stage, duration_ms, metadata_json FROM latency_events"
        " WHERE stage IN ('wire_engine', 'engine_ack') ORDER BY stage",
    )
    assert [row[0] for row in rows] == ["engine_ack", "wire_engine"]
    ((sent_ack,), (sent_wire,)) = query(
        running.db_path,
        "SELECT duration_ms FROM latency_events WHERE stage IN ('dispatch_ack', 'dispatch_wire')"
        " ORDER BY stage",
    )
    # The round trip from the wire stamp, split at the engine's clock: sent -> ack less sent ->
    # wire (a loaded machine can hold the write for milliseconds: seen 16 ms in CI).
    assert abs(rows[0][1] + rows[1][1] - (sent_ack - sent_wire)) < 1.0
    metadata = orjson.loads(rows[0][2])
    assert abs(metadata["engine_offset_ms"]) <= metadata["engine_offset_within_ms"]
