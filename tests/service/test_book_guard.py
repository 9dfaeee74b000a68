"""A running executor carries its halt to the exchange: the kill switch empties the book, an
audit outage triggers the order group and recovery resets it.

An in-process executor trades good_till_canceled orders against the fake exchange over TLS; the
kill switch is a real file, the audit outage SQLite's own error path (``test_audit_trail``'s
triggers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

import executor.trading.assembly as assembly_module
from executor.config.book import BookSettings
from executor.config.settings import ExchangeSettings, Settings
from executor.config.sizing import SizingConfig
from executor.decide.risk import RiskLimits
from executor.exchange.book.guard import LOOK_INTERVAL_S, BookGuard, book_guard
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.audit_trail import AuditTrailState
from executor.recording.counting.counters import TelemetryCounters
from executor.recording.rows import HeartbeatRow
from executor.recording.sqlite_writer import BatchOutcome
from executor.runtime.kill_switch import KillSwitch
from executor.trading.factory import OrderPathFactory
from executor.wire.client import connect
from tests.service.test_audit_trail import HEARTBEAT_S, WAIT_S, query, set_fault, wake
from tests.support.inprocess import RunningServer, start_server

ORDER = "/trade-api/v2/portfolio/events/orders"
"""The order endpoint (the tests place orders on the fake's account directly, unsigned)."""


async def start(
    nursery: trio.Nursery,
    directory: Path,
    exchange: FakeExchange,
    credentials: FakeCredentials,
    *,
    time_in_force: str = "good_till_canceled",
    book: BookSettings | None = None,
) -> RunningServer:
    """An in-process executor with a kill switch at ``directory/halt`` (read every time)."""
    settings = settings_for(exchange, credentials, time_in_force=time_in_force, book=book)
    switch = KillSwitch(directory / "halt", ttl_s=0)
    factory = OrderPathFactory(settings, telemetry_db=directory / "t.db", kill_switch=switch)
    factory.heartbeat_interval_s = HEARTBEAT_S
    return await start_server(nursery, directory, order_path=factory)


def settings_for(
    exchange: FakeExchange,
    credentials: FakeCredentials,
    *,
    time_in_force: str = "good_till_canceled",
    book: BookSettings | None = None,
) -> Settings:
    """Settings trading one contract per order against ``exchange``, the risk gate on."""
    return Settings(
        exchange=ExchangeSettings(
            mode="real",
            base_url=exchange.base_url,
            key_id=credentials.key_id,
            private_key_path=credentials.private_key_path,
            ca_file=credentials.ca_file,
            shadow_signing="loop",
            time_in_force=time_in_force,
            book=book or BookSettings(),
        ),
        sizing=SizingConfig(kelly_fraction=0.0),
        risk_enabled=True,
        risk_limits=RiskLimits(),
        allowed_exchange_indexes=frozenset({0}),
    )


def guard_of(running: RunningServer) -> BookGuard:
    """The running executor's book guard."""
    orders = running.server.fire_path.orders
    assert orders is not None and isinstance(orders.book, BookGuard)
    return orders.book


def resting(exchange: FakeExchange) -> int:
    """Orders resting on the fake."""
    return sum(order.status == "resting" for order in exchange.book.values())


async def rest_three(running: RunningServer, exchange: FakeExchange) -> None:
    """Three real wakes on three markets, each resting on the fake and followed."""
    orders = running.server.fire_path.orders
    assert orders is not None and orders.dispatcher.reconciler is not None
    reconciler = orders.dispatcher.reconciler
    async with connect(running.socket_path) as client:
        for followed, name in enumerate(("one", "two", "three"), start=1):
            assert (await client.request(wake(name))).status == "accepted"
            with trio.fail_after(WAIT_S):  # one at a time: the gate allows two in flight
                while reconciler.resting < followed:  # noqa: ASYNC110
                    await trio.sleep(0.01)
    assert resting(exchange) == 3


def order_in(group_id: str, name: str) -> bytes:
    """A signed-free order body naming ``group_id`` (handed to the fake's account directly)."""
    return orjson.dumps(
        {
            "ticker": "KXDIRECT-26JAN01-T1",
            "client_order_id": name * 32,
            "side": "bid",
            "count": "1.00",
            "price": "0.4200",
            "time_in_force": "fill_or_kill",
            "self_trade_prevention_type": "taker_at_cross",
            "order_group_id": group_id,
        }
    )


async def test_engaging_the_switch_cancels_three_resting_orders_and_triggers_the_group(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Three resting orders, the switch engaged: none rests on the fake, the three rows say
    canceled, the group is triggered (a new order of it is refused); released, it is reset."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    await rest_three(running, fake_exchange)
    (group_id,) = fake_exchange.order_groups.groups
    KillSwitch(short_dir / "halt").engage("operator halt")
    with trio.fail_after(WAIT_S):
        while resting(fake_exchange) or not guard_of(running).group_triggered:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert fake_exchange.order_groups.groups[group_id].triggered
    status, _ = fake_exchange.answer("POST", ORDER, "", order_in(group_id, "x"))
    assert status == 400
    KillSwitch(short_dir / "halt").release()
    with trio.fail_after(WAIT_S):
        while guard_of(running).group_triggered:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert not fake_exchange.order_groups.groups[group_id].triggered
    await running.shutdown()
    rows = query(
        running.db_path,
        "SELECT correlation_id, status, fill_count, remaining_count, error_message"
        " FROM orders_fired ORDER BY id",
    )
    why = "canceled by this executor: kill switch engaged: operator halt"
    assert rows == [(name, "canceled", "0.00", "0.00", why) for name in ("one", "two", "three")]
    assert query(running.db_path, "SELECT order_group_id FROM order_groups") == [(group_id,)]
    statistics = running.server.statistics()
    assert (statistics.cancels_sent, statistics.cancels_failed) == (3, 0)
    assert statistics.order_group_triggered == 0  # reset by the release


async def test_with_cancel_on_engage_off_the_book_is_left_alone(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The negative twin: --no-cancel-resting-on-engage with resting orders: looks go by with
    the switch engaged, and the three orders still rest, the group untouched."""
    running = await start(
        nursery,
        short_dir,
        fake_exchange,
        fake_credentials,
        book=BookSettings(cancel_resting_on_engage=False),
    )
    await rest_three(running, fake_exchange)
    guard = guard_of(running)
    KillSwitch(short_dir / "halt").engage("operator halt")
    looked = guard.looks
    with trio.fail_after(WAIT_S):
        while guard.looks < looked + 2:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert resting(fake_exchange) == 3
    assert not any(group.triggered for group in fake_exchange.order_groups.groups.values())
    await running.shutdown()
    assert running.server.statistics().cancels_sent == 0


async def test_an_audit_outage_triggers_the_group_and_recovery_resets_it(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Audit writes failing: the group is triggered (the fake refuses new orders of the group);
    writes succeeding again: it is reset and an order of the group fills."""
    running = await start(
        nursery, short_dir, fake_exchange, fake_credentials, time_in_force="fill_or_kill"
    )
    (group_id,) = fake_exchange.order_groups.groups
    group = fake_exchange.order_groups.groups[group_id]
    telemetry = running.server.telemetry
    await trio.to_thread.run_sync(set_fault, running.db_path, True)
    with trio.fail_after(WAIT_S):
        while telemetry.audit_available or not guard_of(running).group_triggered:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert group.triggered
    refused = fake_exchange.answer("POST", ORDER, "", order_in(group_id, "a"))
    assert (refused[0], orjson.loads(refused[1])["code"]) == (400, "order_group_triggered")
    assert running.server.statistics().order_group_triggered == 1
    await trio.to_thread.run_sync(set_fault, running.db_path, False)
    with trio.fail_after(WAIT_S):
        while not telemetry.audit_available or guard_of(running).group_triggered:  # noqa: ASYNC110
            await trio.sleep(0.01)
    assert not group.triggered
    placed = fake_exchange.answer("POST", ORDER, "", order_in(group_id, "b"))
    assert placed[0] == 201
    await running.shutdown()
    assert running.server.statistics().order_group_triggered == 0


async def test_a_real_fire_just_after_a_release_waits_for_the_reset_and_fills(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The switch released and a real wake at once, with the exchange slow to answer the reset:
    the order is sent only after the reset, and fills (sent before it, the exchange would reject
    it as an order of a triggered group and its row would say error)."""
    answer = fake_exchange._answer

    async def slow_reset(record: Any, fault: Any, stream: Any) -> tuple[int, bytes] | None:
        if record.path.endswith("/reset"):
            await trio.sleep(0.2)
        return await answer(record, fault, stream)

    monkeypatch.setattr(fake_exchange, "_answer", slow_reset)
    running = await start(
        nursery, short_dir, fake_exchange, fake_credentials, time_in_force="fill_or_kill"
    )
    await release_and_fire(running, short_dir, fake_exchange)
    assert running.server.statistics().order_group_triggered == 0


async def release_and_fire(running: RunningServer, directory: Path, exchange: FakeExchange) -> None:
    """Engage the switch, wait for the group's trigger, release it and send a real wake at once;
    wait until its row says filled, stop the executor: the fake took exactly that one order."""
    switch = KillSwitch(directory / "halt")
    switch.engage("operator halt")
    with trio.fail_after(WAIT_S):
        while not guard_of(running).group_triggered:  # noqa: ASYNC110
            await trio.sleep(0.01)
    switch.release()
    async with connect(running.socket_path) as client:
        assert (await client.request(wake("released"))).status == "accepted"
        with trio.fail_after(WAIT_S):
            while query(running.db_path, "SELECT status FROM orders_fired") != [  # noqa: ASYNC110
                ("filled",)
            ]:
                await trio.sleep(0.02)
    await running.shutdown()
    statuses = [request.status for request in exchange.received if request.path == ORDER]
    assert statuses == [201]


async def test_cancel_on_exit_empties_the_book_at_an_orderly_shutdown(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """--cancel-resting-on-exit: after the shutdown none of the three rests and their rows say
    canceled ("executor shutdown")."""
    running = await start(
        nursery,
        short_dir,
        fake_exchange,
        fake_credentials,
        book=BookSettings(cancel_resting_on_exit=True),
    )
    await rest_three(running, fake_exchange)
    await running.shutdown()
    assert resting(fake_exchange) == 0
    rows = query(running.db_path, "SELECT status, error_message FROM orders_fired")
    assert rows == [("canceled", "canceled by this executor: executor shutdown")] * 3


async def test_by_default_an_orderly_shutdown_leaves_the_book(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The negative twin (the default): the three still rest after the shutdown, rows accepted."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    await rest_three(running, fake_exchange)
    await running.shutdown()
    assert resting(fake_exchange) == 3
    assert query(running.db_path, "SELECT status FROM orders_fired") == [("accepted",)] * 3


@pytest.mark.parametrize(
    ("time_in_force", "flag", "cancels", "triggers"),
    [
        ("good_till_canceled", None, True, True),
        ("good_till_canceled", True, True, True),
        ("good_till_canceled", False, False, False),
        ("fill_or_kill", None, False, True),
        ("fill_or_kill", False, False, True),
        ("immediate_or_cancel", True, True, True),
    ],
)
def test_what_an_engage_does_follows_the_time_in_force_and_the_flag(
    time_in_force: str, flag: bool | None, cancels: bool, triggers: bool
) -> None:
    """Orders that rest are cancelled unless the flag says no; the group is triggered unless
    orders rest and the operator asked for them to be left (a trigger would cancel them)."""
    exchange = ExchangeSettings(
        mode="real",
        time_in_force=time_in_force,
        book=BookSettings(cancel_resting_on_engage=flag),
    )
    guard = book_guard(exchange, None, None, None, None, None, None)  # type: ignore[arg-type]
    assert (guard.cancel_on_engage, guard.trigger_on_engage) == (cancels, triggers)


class FlakySwitch:
    """A kill switch whose first reading raises (a bug), then reads released."""

    def __init__(self) -> None:
        self.readings = 0

    def engaged_reason(self) -> str | None:
        self.readings += 1
        if self.readings == 1:
            raise RuntimeError("boom")
        return None


async def test_a_look_that_raises_is_logged_and_the_guard_looks_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A bug in one look costs that look (one ERROR line with the traceback), not the order
    path: the guard starts and keeps looking."""
    switch = FlakySwitch()
    guard = BookGuard(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        group=None,
        kill_switch=switch,  # type: ignore[arg-type]
        audit=None,
        cancel_on_engage=True,
        trigger_on_engage=True,
    )
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            await nursery.start(guard.run)
            await trio.sleep(LOOK_INTERVAL_S * 3.5)
            nursery.cancel_scope.cancel()
    assert guard.looks == 3 and switch.readings == 4
    assert [entry["event"] for entry in logs if entry["log_level"] == "error"] == [
        "book guard look failed"
    ]


HEARTBEAT = HeartbeatRow(
    process="executor", pid=1, started_at_ms=1, beat_at_ms=2, queue_depth=0, dropped_rows=0
)
"""A heartbeat row for batch outcomes (its failure is an audit outage)."""


class CountingSwitch:
    """A kill switch that is never engaged and counts how often it was read (one per look)."""

    def __init__(self) -> None:
        self.readings = 0

    def engaged_reason(self) -> str | None:
        self.readings += 1
        return None


def idle_guard(switch: CountingSwitch) -> BookGuard:
    """A guard with nothing to cancel or trigger, over ``switch``."""
    return BookGuard(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        group=None,
        kill_switch=switch,  # type: ignore[arg-type]
        audit=None,
        cancel_on_engage=True,
        trigger_on_engage=True,
    )


async def test_an_audit_transition_makes_the_guard_look_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Attached to the audit trail, the guard looks the moment the trail goes down and again the
    moment it returns, with the clock standing still (not at its next interval)."""
    guard = idle_guard(CountingSwitch())
    trail = AuditTrailState(TelemetryCounters(), Path("t.db"))
    trail.on_change(guard.hear_audit)
    async with trio.open_nursery() as nursery:
        await nursery.start(guard.run)
        await trio.testing.wait_all_tasks_blocked()
        assert guard.looks == 1
        trail.account(BatchOutcome(0, False, heartbeat_failures=[(HEARTBEAT, "disk is full")]))
        await trio.testing.wait_all_tasks_blocked()
        assert guard.looks == 2
        trail.account(BatchOutcome(0, True, heartbeat_rows_written=1))
        await trio.testing.wait_all_tasks_blocked()
        assert guard.looks == 3
        nursery.cancel_scope.cancel()


async def test_without_a_transition_the_guard_waits_for_its_interval(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The negative twin: batches that change nothing wake no look before the interval."""
    guard = idle_guard(CountingSwitch())
    trail = AuditTrailState(TelemetryCounters(), Path("t.db"))
    trail.on_change(guard.hear_audit)
    async with trio.open_nursery() as nursery:
        await nursery.start(guard.run)
        trail.account(BatchOutcome(3, True))
        await trio.testing.wait_all_tasks_blocked()
        assert guard.looks == 1
        mock_clock.jump(LOOK_INTERVAL_S)
        await trio.testing.wait_all_tasks_blocked()
        assert guard.looks == 2
        nursery.cancel_scope.cancel()


def test_the_order_path_attaches_the_guard_to_the_audit_trail() -> None:
    """Start-up wires the audit trail's transitions to the guard (a listener, not a poll)."""
    source = Path(assembly_module.__file__).read_text(encoding="utf-8")
    assert "audit_trail.on_change(guard.hear_audit)" in source
