"""The executor with an exchange, end to end: wakes in, signed orders over TLS, rows out.

Every executor here is the in-process server with the order path of ``executor.trading.assembly``,
trading
against ``executor.fake.exchange`` on 127.0.0.1 over real TLS; rows are read back from SQLite.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from executor.clock import clock_domain
from executor.config.settings import ExchangeSettings, Settings
from executor.config.sizing import SizingConfig
from executor.config.variables import StartupError
from executor.decide.order_request import FireRequest, OrderTemplate
from executor.decide.risk import RiskLimits
from executor.exchange.orders.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.orders.shadow_lane import SHADOW_LANE_CAPACITY
from executor.exchange.orders.stages import FireStamps
from executor.exchange.orders.transport import ORDER_PATH
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault, never_fill
from executor.fire.path import FirePath
from executor.recording.counting.counters import ServerStatistics
from executor.recording.rows import OrderStatus, Stage, latency_row
from executor.signer import KalshiSigner
from executor.telemetry import serve_telemetry
from executor.trading.factory import OrderPathFactory
from executor.wire.client import connect
from executor.wire.protocol import WakeMessage
from tests.support.inprocess import RunningServer, make_wake, start_server
from tests.support.order_fakes import FakePlacer

WAIT_S = 10.0
"""Bound on waiting for the fake to see a request (seconds): TLS on a busy 2-core box."""

ONE_CONTRACT = SizingConfig(kelly_fraction=0.0)
"""Sizing that always comes to the fixed count of 1: the default Kelly sizing of a $1,000 fake
account would exceed the default position limit and every order would be a risk refusal."""

REFUSED_KEYS = ("refused_price", "refused_kill_switch", "refused_volume", "refused_risk")


def settings_for(
    exchange: FakeExchange,
    credentials: FakeCredentials,
    *,
    sizing: SizingConfig = ONE_CONTRACT,
    risk_limits: RiskLimits | None = None,
    **exchange_overrides: Any,
) -> Settings:
    """Real-mode settings that trade against ``exchange`` and trust its CA."""
    return Settings(
        exchange=replace(
            ExchangeSettings(
                mode="real",
                base_url=exchange.base_url,
                key_id=credentials.key_id,
                private_key_path=credentials.private_key_path,
                ca_file=credentials.ca_file,
            ),
            **exchange_overrides,
        ),
        sizing=sizing,
        risk_enabled=True,
        risk_limits=risk_limits or RiskLimits(),
        allowed_exchange_indexes=frozenset({0}),
    )


async def start_trading(
    nursery: trio.Nursery,
    directory: Path,
    exchange: FakeExchange,
    credentials: FakeCredentials,
    *,
    settings: Settings | None = None,
    **config: Any,
) -> RunningServer:
    """An in-process executor trading against ``exchange``, rows in ``directory/t.db``."""
    factory = OrderPathFactory(
        settings or settings_for(exchange, credentials),
        telemetry_db=directory / "t.db",
        kill_switch=None,
    )
    return await start_server(nursery, directory, order_path=factory, **config)


def real_wake(correlation_id: str, **overrides: Any) -> WakeMessage:
    """A real wake on shard 0 whose recv_ns was read on this host's clock just now."""
    fields: dict[str, Any] = {
        "exchange_index": 0,
        "recv_ns": time.perf_counter_ns(),
        "clock_domain": clock_domain(),
    }
    fields.update(overrides)
    return make_wake(correlation_id, **fields)


def query(db_path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of one query against the executor's database."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        rows = db.execute(sql, args).fetchall()
    return rows


def stages_of(db_path: Path, correlation_id: str) -> list[str]:
    """The stages recorded for ``correlation_id``, in insertion order."""
    rows = query(
        db_path,
        "SELECT stage FROM latency_events WHERE correlation_id = ? ORDER BY id",
        correlation_id,
    )
    return [stage for (stage,) in rows]


def order_posts(exchange: FakeExchange) -> list[dict[str, Any]]:
    """The order bodies the fake received."""
    return [
        orjson.loads(request.body)
        for request in exchange.received
        if request.method == "POST" and request.path == ORDER_PATH
    ]


async def wait_for_order(exchange: FakeExchange, count: int = 1) -> None:
    """Wait until the fake has received ``count`` order requests."""
    with trio.fail_after(WAIT_S):
        # The fake appends to a list and has no event to wait on; poll it, bounded.
        while len(order_posts(exchange)) < count:  # noqa: ASYNC110
            await trio.sleep(0.01)


def assert_balanced(stats: ServerStatistics) -> None:
    """accepted - unacked == fired + every refusal; the error counters are subsets of fired."""
    refused = sum(getattr(stats, key) for key in REFUSED_KEYS) + stats.refused_permission
    assert stats.accepted - stats.unacked == stats.fired + refused
    assert stats.dispatch_errors + stats.fires_cancelled <= stats.fired


async def test_real_fire_sends_a_signed_order_and_leaves_every_row(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A real wake becomes one verified order; orders_fired and all six stage rows are written."""
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("e2e-1", correlation_group="g1"))
        await wait_for_order(fake_exchange)
    await running.shutdown()
    [posted] = order_posts(fake_exchange)
    [request] = [r for r in fake_exchange.received if r.path == ORDER_PATH]
    assert request.verified and request.status == 201
    # [ours] after DISPATCH.md §5's keys: the pause flag and this run's order group.
    (group_id,) = fake_exchange.order_groups.groups
    assert list(posted)[-3:] == ["exchange_index", "cancel_order_on_pause", "order_group_id"]
    assert (posted["cancel_order_on_pause"], posted["order_group_id"]) == (True, group_id)
    assert (posted["ticker"], posted["side"], posted["count"], posted["price"]) == (
        "KXBTCD-26AUG2917-T112750",
        "bid",
        "1.00",
        "0.5600",
    )
    [row] = query(
        running.db_path,
        "SELECT client_order_id, kalshi_order_id, status, fill_count, correlation_group,"
        " submitted_at_ms, acknowledged_at_ms FROM orders_fired WHERE correlation_id = 'e2e-1'",
    )
    assert row[0] == posted["client_order_id"]
    assert row[1] == fake_exchange.orders[posted["client_order_id"]]["order_id"]
    assert row[2:5] == ("filled", "1.00", "g1")
    assert row[5] is not None and row[6] >= row[5]
    assert stages_of(running.db_path, "e2e-1") == [
        "wake_recv",
        "order_build",
        "sign",
        "dispatch_send",
        "dispatch_ack",
        "detect_fire",
        "dispatch_wire",
        "detect_wire",
        "wire_engine",
        "engine_ack",
    ]
    stats = running.server.statistics()
    assert stats.fired == 1
    assert_balanced(stats)
    heartbeats = query(running.db_path, "SELECT process, pid FROM heartbeats")
    assert [process for process, _ in heartbeats] == ["executor"]


async def test_order_is_sized_from_the_polled_balance(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """With the fake's $1,000 polled at start-up, edge 0.05 at 0.42 sizes to 30 contracts."""
    roomy = RiskLimits(
        max_notional_per_day_dollars=1000.0,
        max_position_contracts_per_ticker=100.0,
        max_position_contracts_per_event=100.0,
        max_position_contracts_per_correlation_group=100.0,
    )
    settings = settings_for(
        fake_exchange, fake_credentials, sizing=SizingConfig(), risk_limits=roomy
    )
    running = await start_trading(
        nursery, short_dir, fake_exchange, fake_credentials, settings=settings
    )
    async with connect(running.socket_path) as client:
        await client.request(real_wake("sized", edge=0.05, kalshi_price=0.42))
        await wait_for_order(fake_exchange)
    await running.shutdown()
    assert [body["count"] for body in order_posts(fake_exchange)] == ["30.00"]
    assert query(running.db_path, "SELECT count FROM orders_fired") == [("30.00",)]


async def test_killed_order_is_canceled_and_wake_off_clock_has_no_detect_fire(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A killed fill-or-kill is 'canceled'; a wake from another clock gets no detect_fire."""
    fake_exchange.fill_rule = never_fill
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("killed", clock_domain="other-host:0"))
        await wait_for_order(fake_exchange)
    await running.shutdown()
    assert query(running.db_path, "SELECT status, fill_count FROM orders_fired") == [
        ("canceled", "0.00")
    ]
    assert "detect_fire" not in stages_of(running.db_path, "killed")
    assert "dispatch_ack" in stages_of(running.db_path, "killed")


async def test_shadow_fire_signs_but_sends_nothing(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A shadow wake writes order_build/sign/dispatch_send/detect_fire, no order row, no POST."""
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("shadow-1", dry_run=True))
    await running.shutdown()
    assert order_posts(fake_exchange) == []
    assert query(running.db_path, "SELECT COUNT(*) FROM orders_fired") == [(0,)]
    assert stages_of(running.db_path, "shadow-1") == [
        "wake_recv",
        "order_build",
        "sign",
        "dispatch_send",
        "detect_fire",
    ]
    metadata = query(
        running.db_path,
        "SELECT DISTINCT metadata_json FROM latency_events"
        " WHERE stage NOT IN ('wake_recv', 'sign')",
    )
    assert metadata == [('{"dry_run": true}',)]
    (sign,) = query(
        running.db_path, "SELECT metadata_json FROM latency_events WHERE stage = 'sign'"
    )
    assert json.loads(sign[0])["dry_run"] is True


async def test_exchange_error_is_an_error_row_and_counted(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """An order the exchange refuses (400) resolves as 'error' with the exchange's text."""
    fake_exchange.inject(Fault("status", status=400, code="bad_order", message="no such market"))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("refused"))
        await wait_for_order(fake_exchange)
    await running.shutdown()
    [(status, message, acknowledged)] = query(
        running.db_path, "SELECT status, error_message, acknowledged_at_ms FROM orders_fired"
    )
    assert (status, acknowledged) == ("error", None)
    assert message == "400 bad_order: no such market"
    stats = running.server.statistics()
    assert (stats.fired, stats.dispatch_errors, stats.fire_errors) == (1, 1, 0)
    assert_balanced(stats)


async def test_shutdown_waits_for_the_order_in_flight(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """An order answered 1 s late, with shutdown asked meanwhile, still lands its resolution row."""
    fake_exchange.inject(Fault("latency", seconds=1.0))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("slow"))
        await wait_for_order(fake_exchange)
        await running.shutdown()
    assert query(running.db_path, "SELECT status FROM orders_fired") == [("filled",)]
    stats = running.server.statistics()
    assert (stats.fired, stats.fires_cancelled) == (1, 0)
    assert_balanced(stats)


async def test_grace_shorter_than_the_order_cancels_it_with_a_row(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """With a grace shorter than the exchange's delay the order resolves 'cancelled at shutdown'."""
    fake_exchange.inject(Fault("latency", seconds=1.0))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials, grace_s=0.1)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("cut"))
        await wait_for_order(fake_exchange)
        await running.shutdown()
    assert query(running.db_path, "SELECT status, error_message FROM orders_fired") == [
        ("error", "cancelled at shutdown")
    ]
    assert stages_of(running.db_path, "cut") == [
        "wake_recv",
        "order_build",
        "sign",
        "dispatch_send",
        "detect_fire",
        "dispatch_wire",  # the request was on the wire when shutdown cut the wait for its answer
        "detect_wire",
    ]
    stats = running.server.statistics()
    assert (stats.fired, stats.fires_cancelled) == (1, 1)
    assert_balanced(stats)


async def test_a_restarted_executor_remembers_the_attempt(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The warm start reads what the first executor wrote: a refire in the cooldown is refused."""
    first = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(first.socket_path) as client:
        await client.request(real_wake("before"))
        await wait_for_order(fake_exchange)
    await first.shutdown()

    second = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(second.socket_path) as client:
        await client.request(real_wake("after"))
    await second.shutdown()
    assert len(order_posts(fake_exchange)) == 1
    [(status, message)] = query(
        second.db_path,
        "SELECT status, error_message FROM orders_fired WHERE correlation_id = 'after'",
    )
    assert status == "rejected"
    assert message.startswith("risk gate: cooldown: last yes attempt on KXBTCD-26AUG2917-T112750")
    stats = second.server.statistics()
    assert (stats.fired, stats.refused_risk) == (0, 1)
    assert_balanced(stats)


async def test_bad_key_is_a_startup_error(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A private key that cannot be loaded stops start-up with one StartupError; nothing listens."""
    bad_key = short_dir / "bad.pem"
    bad_key.write_text("not a key")
    settings = settings_for(fake_exchange, fake_credentials, private_key_path=bad_key)
    factory = OrderPathFactory(settings, telemetry_db=short_dir / "t.db", kill_switch=None)
    with pytest.raises(StartupError, match=r"bad\.pem"):
        await start_server(nursery, short_dir, order_path=factory)
    assert not (short_dir / "x.sock").exists()


async def test_unreachable_exchange_is_a_startup_error(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """An exchange whose TLS the executor cannot verify stops start-up with one StartupError."""
    settings = settings_for(fake_exchange, fake_credentials, ca_file=None)  # system store
    factory = OrderPathFactory(settings, telemetry_db=short_dir / "t.db", kill_switch=None)
    with pytest.raises(StartupError, match="cannot be reached"):
        await start_server(nursery, short_dir, order_path=factory)
    assert not (short_dir / "x.sock").exists()


class RecordingSigner(KalshiSigner):
    """A signer that keeps every signature it makes, in order."""

    def __init__(self, private_key_path: Path, key_id: str) -> None:
        super().__init__(private_key_path, key_id)
        self.signatures: list[str] = []

    def sign(self, timestamp: str, method: str, path: str) -> str:
        signature = super().sign(timestamp, method, path)
        self.signatures.append(signature)
        return signature


class ArrivalLog(list[Any]):
    """The fake's ``received`` list, noting how many signatures existed as each request arrived."""

    def __init__(self, signer: RecordingSigner) -> None:
        super().__init__()
        self.signer = signer
        self.signed_before: list[int] = []

    def append(self, item: Any) -> None:
        self.signed_before.append(len(self.signer.signatures))
        super().append(item)


async def test_real_order_goes_out_ahead_of_queued_shadow_fires(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Over the real transport, a real fire queued after 16 shadow fires is signed and sent first.

    With shadow signing on the loop (``--shadow-signing loop``), the shadow lane signs one order
    per pass through the scheduler; the real fire signs in its own task. The real order's
    signature is found among the signer's by the header the fake received; the shadow orders
    queued ahead of it must mostly be signed after it.
    """
    signer = RecordingSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    factory = OrderPathFactory(
        # Signing ahead off: every signature is then this signer's, on the loop.
        settings_for(fake_exchange, fake_credentials, shadow_signing="loop", presign_max_age_ms=0),
        telemetry_db=short_dir / "t.db",
        kill_switch=None,
        signer=signer,
    )
    telemetry = await nursery.start(serve_telemetry, short_dir / "t.db")
    burst = SHADOW_LANE_CAPACITY
    async with factory(telemetry) as fire_path:
        arrivals = ArrivalLog(signer)
        fake_exchange.received = arrivals
        signed_at_start = len(signer.signatures)  # the pre-warm and account poll signed too
        for index in range(burst):  # no checkpoint in between: all queue in the lane
            await fire_path.fire(real_wake(f"shadow-{index}", dry_run=True))
        await fire_path.fire(real_wake("real"))
        with trio.fail_after(WAIT_S):
            while len(signer.signatures) < signed_at_start + burst + 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
    telemetry.close()
    [(position, request)] = [
        (i, r) for i, r in enumerate(arrivals) if r.method == "POST" and r.path == ORDER_PATH
    ]
    real_index = signer.signatures.index(request.headers["kalshi-access-signature"])
    shadows_signed_first = real_index - signed_at_start
    assert shadows_signed_first <= 2, shadows_signed_first
    signed_when_received = arrivals.signed_before[position] - signed_at_start
    assert signed_when_received < burst + 1, signed_when_received
    assert fire_path.counters().shadow_skipped == 0


class LaneProgressLog(list[Any]):
    """The fake's ``received`` list, noting how many shadow orders the lane had signed by then."""

    def __init__(self, fire_path: FirePath) -> None:
        super().__init__()
        assert fire_path.orders is not None
        self.lane = fire_path.orders.lane
        self.signed_before: list[int] = []

    def append(self, item: Any) -> None:
        self.signed_before.append(self.lane.signed)
        super().append(item)


async def test_real_order_goes_out_before_shadow_fires_signed_in_a_worker(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """With shadow signing in a worker process (the default), a real fire queued after 16 shadow
    fires reaches the exchange before the lane has signed them all."""
    factory = OrderPathFactory(
        settings_for(fake_exchange, fake_credentials),
        telemetry_db=short_dir / "t.db",
        kill_switch=None,
    )
    telemetry = await nursery.start(serve_telemetry, short_dir / "t.db")
    burst = SHADOW_LANE_CAPACITY
    async with factory(telemetry) as fire_path:
        arrivals = LaneProgressLog(fire_path)
        fake_exchange.received = arrivals
        for index in range(burst):  # no checkpoint in between: all queue in the lane
            await fire_path.fire(real_wake(f"shadow-{index}", dry_run=True))
        await fire_path.fire(real_wake("real"))
        assert fire_path.orders is not None
        with trio.fail_after(WAIT_S):
            while fire_path.orders.lane.signed < burst:  # noqa: ASYNC110
                await trio.sleep(0.01)
    telemetry.close()
    [position] = [i for i, r in enumerate(arrivals) if r.method == "POST" and r.path == ORDER_PATH]
    assert arrivals.signed_before[position] < burst, arrivals.signed_before[position]
    assert fire_path.counters().shadow_skipped == 0


async def test_dropped_pending_row_is_recreated_by_its_resolution(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """With telemetry too full for the pending row, the resolution alone writes the order row."""
    db_path = short_dir / "t.db"
    telemetry = await nursery.start(partial(serve_telemetry, db_path, capacity=1))
    dispatcher = OrderDispatcher(
        FakePlacer([], response={"order_id": "k", "fill_count": "1.00"}),
        telemetry,
        OrderPolicy(),
    )
    filler = latency_row("filler", Stage.WAKE_RECV, 0, 0, 0.0)
    telemetry.record(filler)  # handed straight to the waiting consumer
    telemetry.record(filler)  # fills the one-row buffer; no checkpoint since
    request = FireRequest(OrderTemplate("KXA-1", "yes", "bid"), "0.5600", 1, 0, "c-full", "", False)
    result = await dispatcher.dispatch(request, FireStamps())
    telemetry.close()
    assert result.status is OrderStatus.FILLED
    with trio.fail_after(WAIT_S):
        while telemetry.statistics().order_rows_written < 1:  # noqa: ASYNC110
            await trio.sleep(0.01)
    stats = telemetry.statistics()
    assert (stats.order_rows_written, stats.order_rows_dropped) == (1, 1)
    assert query(db_path, "SELECT status, fill_count, requested_at_ms > 0 FROM orders_fired") == [
        ("filled", "1.00", 1)
    ]
