"""Reconciliation in a running executor: an order whose answer never came is looked up on the
exchange, its row corrected, its fill counted by the risk gate, and the counts shown.

The in-process executor with the real order path trades against the fake over TLS; the fake
places the order and never answers (``Fault("hang", place=True)``) or never places it. The
order budget and the waits between lookups are shortened (tunables, not the behaviour).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from structlog.testing import capture_logs

import executor.exchange.follow.account as account_module
import executor.exchange.follow.lookup as order_lookup_module
import executor.exchange.follow.reconcile as reconcile_module
import executor.exchange.orders.transport as transport_module
from executor.decide.risk import RiskLimits
from executor.exchange.orders.transport import ORDERS_PATH
from executor.fake.book.account import ORDER_EXISTS_CODE, ORDER_EXISTS_MESSAGE
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault, never_fill
from executor.recording.counting.metrics import ExecutorCollector
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
)
from executor.stats.command import stats_main
from executor.wire.client import connect
from tests.service.test_fire_e2e import (
    assert_balanced,
    order_posts,
    query,
    real_wake,
    settings_for,
    start_trading,
)
from tests.support.inprocess import RunningServer

WAIT_S = 20.0
"""Bound on one order's timeout plus its lookups (seconds), on a busy 2-core box."""


@pytest.fixture(autouse=True)
def quick_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Orders give up after 0.5 s, lookups follow each other at once, and the exchange's data
    covers a send as soon as it is stamped after it (no margin: the fake's clock is ours)."""
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(reconcile_module, "RECONCILE_DELAYS_S", (0.0, 0.0, 0.0))
    monkeypatch.setattr(order_lookup_module, "ABSENCE_MARGIN_MS", 0)


async def settled(running: RunningServer, *, reconciled: int, failed: int) -> None:
    """Wait until the executor has counted this many reconciliations (it logs each at once)."""
    with trio.fail_after(WAIT_S):
        while True:
            stats = running.server.statistics()
            if (stats.reconciled, stats.reconcile_failed) == (reconciled, failed):
                return
            await trio.sleep(0.01)


async def dispatches_done(running: RunningServer) -> None:
    """Wait until no dispatch is in flight: the reconciled fill has reached the risk gate.

    The ``reconciled`` count moves before the reconciled order's fire task has handed the fill to
    the gate; a wake decided in between (a real wake is decided as soon as it is read) would not
    see it yet.
    """
    orders = running.server._fire_path.orders
    assert orders is not None and orders.risk is not None
    with trio.fail_after(WAIT_S):
        while orders.risk.in_flight:  # noqa: ASYNC110
            await trio.sleep(0.01)


async def trade_one(
    nursery: trio.Nursery,
    short_dir: Path,
    exchange: FakeExchange,
    credentials: FakeCredentials,
    correlation_id: str,
    *,
    reconciled: int,
    failed: int,
) -> RunningServer:
    """Start an executor on the fake, send one real wake, wait until its reconciliation is
    counted, and stop it (the database stays for the test to read)."""
    running = await start_trading(nursery, short_dir, exchange, credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake(correlation_id))
        await settled(running, reconciled=reconciled, failed=failed)
    await running.shutdown()
    return running


def metric(running: RunningServer, name: str) -> float:
    """One counter as ``--metrics`` would serve it."""
    collector = ExecutorCollector(
        running.server.statistics, lambda: running.server.telemetry.statistics()
    )
    for family in collector.collect():
        if family.name == name:
            return float(family.samples[0].value)
    raise AssertionError(f"no metric {name}")


async def test_a_timed_out_order_the_exchange_filled_ends_filled_and_is_counted(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The order was placed but never answered: its row ends ``filled`` with the exchange's id,
    sent once, counted ``reconciled`` (not a dispatch error), and its fill reaches the risk
    gate: with a one-contract position limit the other side of the ticker is then refused."""
    fake_exchange.inject(Fault("hang", place=True))
    settings = settings_for(
        fake_exchange,
        fake_credentials,
        risk_limits=RiskLimits(max_position_contracts_per_ticker=1),
    )
    running = await start_trading(
        nursery, short_dir, fake_exchange, fake_credentials, settings=settings
    )
    async with connect(running.socket_path) as client:
        await client.request(real_wake("hung"))
        await settled(running, reconciled=1, failed=0)
        await dispatches_done(running)
        await client.request(real_wake("other-side", direction="no"))
        with trio.fail_after(WAIT_S):
            while len(query(running.db_path, "SELECT id FROM orders_fired")) < 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
    assert metric(running, "trio_executor_reconciled") == 1.0
    await running.shutdown()
    (placed,) = fake_exchange.orders.values()
    rows = query(
        running.db_path,
        "SELECT correlation_id, status, kalshi_order_id, fill_count, error_message"
        " FROM orders_fired ORDER BY id",
    )
    assert rows[0] == (
        "hung",
        "filled",
        placed["order_id"],
        "1.00",
        RECONCILED_PREFIX + "no response within 0.5 s",
    )
    assert rows[1][:2] == ("other-side", "rejected")
    assert "position on" in rows[1][4] and "would reach 2 contracts (max 1)" in rows[1][4]
    assert len(order_posts(fake_exchange)) == 1  # never re-sent
    stats = running.server.statistics()
    assert (stats.reconciled, stats.reconcile_failed, stats.dispatch_errors) == (1, 0, 0)
    assert_balanced(stats)


async def test_a_timed_out_kill_ends_canceled(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Placed and killed, never answered: the row ends ``canceled``, nothing filled, and the
    order's log line says so (not the interim ``error``)."""
    fake_exchange.fill_rule = never_fill
    fake_exchange.inject(Fault("hang", place=True))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    with capture_logs() as logs:
        async with connect(running.socket_path) as client:
            await client.request(real_wake("killed"))
            await settled(running, reconciled=1, failed=0)
            with trio.fail_after(WAIT_S):
                while not any(entry["event"] == "order resolved" for entry in logs):  # noqa: ASYNC110
                    await trio.sleep(0.01)
    await running.shutdown()
    (line,) = [entry for entry in logs if entry["event"] == "order resolved"]
    assert (line["status"], line["fill_count"]) == ("canceled", "0.00")  # the corrected row
    assert query(running.db_path, "SELECT status, fill_count FROM orders_fired") == [
        ("canceled", "0.00")
    ]


async def test_an_order_the_exchange_never_had_stays_error_and_stats_show_it(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Never placed, never answered: after the lookups the row stays ``error`` saying the
    exchange has no such order, counted ``reconcile_failed`` and a dispatch error; ``executor
    stats`` reports it."""
    fake_exchange.inject(Fault("hang"))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("lost"))
        await settled(running, reconciled=0, failed=1)
    await running.shutdown()
    assert query(
        running.db_path, "SELECT status, kalshi_order_id, error_message FROM orders_fired"
    ) == [("error", None, NO_SUCH_ORDER_PREFIX + "no response within 0.5 s")]
    stats = running.server.statistics()
    assert (stats.reconcile_failed, stats.dispatch_errors) == (1, 1)
    assert fake_exchange.orders == {}
    capsys.readouterr()
    assert stats_main(["--telemetry-db", str(running.db_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["orders_fired"]["reconciliation"] == {
        "reconciled": 0,
        "reconcile_failed": 1,
        "outcome_unknown": 0,
        "open": 0,
        "adopted": 0,
    }
    assert stats_main(["--telemetry-db", str(running.db_path)]) == 0
    assert "reconciliation: reconciled=0 reconcile_failed=1" in capsys.readouterr().out


async def test_a_resting_order_that_fills_later_is_followed_to_filled(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """good_till_canceled: the order rests (``accepted``); the exchange fills it later and the
    next account poll turns its row ``filled``."""
    monkeypatch.setattr(account_module, "ACCOUNT_POLL_INTERVAL_S", 0.05)
    settings = settings_for(fake_exchange, fake_credentials, time_in_force="good_till_canceled")
    running = await start_trading(
        nursery, short_dir, fake_exchange, fake_credentials, settings=settings
    )
    async with connect(running.socket_path) as client:
        await client.request(real_wake("rests"))
        with trio.fail_after(WAIT_S):
            while query(running.db_path, "SELECT status FROM orders_fired") != [  # noqa: ASYNC110
                ("accepted",)
            ]:
                await trio.sleep(0.01)
        (client_order_id,) = fake_exchange.book
        fake_exchange.fill_resting(client_order_id)
        with trio.fail_after(WAIT_S):
            while query(running.db_path, "SELECT status FROM orders_fired") != [  # noqa: ASYNC110
                ("filled",)
            ]:
                await trio.sleep(0.01)
    await running.shutdown()
    assert query(running.db_path, "SELECT fill_count, remaining_count FROM orders_fired") == [
        ("1.00", "0.00")
    ]


async def test_a_definite_refusal_is_not_looked_up(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A 400 is a definite answer: the row keeps its text, no lookup is made, nothing counted."""
    fake_exchange.inject(Fault("status", status=400, code="invalid_parameters", message="no"))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("refused"))
        with trio.fail_after(WAIT_S):
            while running.server.statistics().dispatch_errors < 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
    await running.shutdown()
    assert query(running.db_path, "SELECT status, error_message FROM orders_fired") == [
        ("error", "400 invalid_parameters: no")
    ]
    assert [r for r in fake_exchange.received if r.path == ORDERS_PATH] == []
    stats = running.server.statistics()
    assert (stats.reconciled, stats.reconcile_failed) == (0, 0)


async def test_a_5xx_on_the_last_attempt_is_looked_up(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Three 503s: the exchange may have taken the order, so it is asked; it has none (its data
    already covers the send, so one try settles it), and the row says so after the 503's
    text."""
    fake_exchange.inject(*[Fault("status", status=503, message="busy")] * 3)
    running = await trade_one(
        nursery, short_dir, fake_exchange, fake_credentials, "busy", reconciled=0, failed=1
    )
    ((status, message),) = query(running.db_path, "SELECT status, error_message FROM orders_fired")
    assert status == "error"
    assert message.startswith(NO_SUCH_ORDER_PREFIX + "503 ") and message.endswith("busy")
    assert len([r for r in fake_exchange.received if r.path == ORDERS_PATH]) == 1


async def test_a_409_already_exists_means_placed_looked_up_never_resent(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The order reaches the exchange twice (a repeating network): the first delivery places
    it, the answer the executor hears is the repeat's 409 "already exists". The order is
    looked up, never re-sent: its row ends ``filled`` with the exchange's id, no error row is
    left, and it is no dispatch error."""
    fake_exchange.inject(Fault("duplicate"))
    running = await trade_one(
        nursery, short_dir, fake_exchange, fake_credentials, "twice", reconciled=1, failed=0
    )
    (placed,) = fake_exchange.orders.values()
    ((status, order_id, message),) = query(
        running.db_path, "SELECT status, kalshi_order_id, error_message FROM orders_fired"
    )
    assert (status, order_id) == ("filled", placed["order_id"])
    assert message == RECONCILED_PREFIX + f"409 {ORDER_EXISTS_CODE}: {ORDER_EXISTS_MESSAGE}"
    assert len(order_posts(fake_exchange)) == 1  # one request (delivered twice), never re-sent
    stats = running.server.statistics()
    assert (stats.dispatch_errors, stats.orders_open, stats.lookups_unknown) == (0, 0, 0)


async def test_a_2xx_without_an_order_is_reconciled_never_filled_from_it(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The exchange takes the order and answers 201 with an error object and no order: the row
    is reconciled with what the exchange has (here a kill: ``canceled``), not read as an
    answer, and the order is sent once."""
    fake_exchange.fill_rule = never_fill
    fake_exchange.inject(Fault("status", status=201, code="odd", message="no order", place=True))
    running = await trade_one(
        nursery, short_dir, fake_exchange, fake_credentials, "odd", reconciled=1, failed=0
    )
    ((status, message),) = query(running.db_path, "SELECT status, error_message FROM orders_fired")
    assert status == "canceled"
    assert message.startswith(RECONCILED_PREFIX + "answered without an order: ")
    assert len(order_posts(fake_exchange)) == 1


async def test_an_order_not_listed_yet_stays_open_and_is_counted_unknown(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never placed, and the exchange's data not yet past the send plus the (real) margin: the
    fire's lookups end unknown, the row keeps its "outcome unknown" marker, and the executor
    shows one unknown lookup and one open order (statistics and --metrics)."""
    monkeypatch.setattr(order_lookup_module, "ABSENCE_MARGIN_MS", 10_000)
    fake_exchange.inject(Fault("hang"))
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("not-yet"))
        with trio.fail_after(WAIT_S):
            while running.server.statistics().lookups_unknown < 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
    assert metric(running, "trio_executor_orders_open") == 1.0
    assert metric(running, "trio_executor_lookups_unknown") == 1.0
    await running.shutdown()
    ((status, message),) = query(running.db_path, "SELECT status, error_message FROM orders_fired")
    assert (status, message) == ("error", OUTCOME_UNKNOWN_PREFIX + "no response within 0.5 s")
    stats = running.server.statistics()
    assert (stats.reconcile_failed, stats.dispatch_errors, stats.orders_open) == (0, 1, 1)
