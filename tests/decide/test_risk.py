"""The risk gate: DISPATCH.md §3's thirteen rules, their order, windows, and the warm start."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from executor.config.risk_limits import DAY_MS, HOUR_MS, RISK_ENV_VARS, RiskLimits
from executor.decide.risk import RiskGate, event_of
from executor.recording.orders.recent_orders import PastOrder, load_recent_orders
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from tests.support.rows import order_row, running_telemetry

T0 = 1_700_000_000_000
"""A wall-clock start (ms) for every scenario."""

MINUTE_MS = 60_000
ALLOWED = frozenset({0, 2})


def make_gate(**limits: Any) -> RiskGate:
    """A gate over the default limits with ``limits`` changed, allowing exchanges 0 and 2."""
    return RiskGate(dataclasses.replace(RiskLimits(), **limits), ALLOWED)


def check(
    gate: RiskGate,
    ticker: str = "KXA-25NOV30-B40",
    *,
    direction: str = "yes",
    exchange_index: int = 0,
    count: int = 1,
    price: float = 0.40,
    now_ms: int = T0,
    group: str = "",
) -> str | None:
    return gate.check(ticker, direction, exchange_index, count, price, now_ms, group)


def attempt(
    gate: RiskGate,
    ticker: str,
    now_ms: int,
    *,
    direction: str = "yes",
    count: int = 1,
    price: float = 0.40,
    group: str = "",
) -> None:
    gate.record_attempt(ticker, direction, count, price, now_ms, group)


# --- configuration ---


def test_env_var_names_are_exactly_the_specs() -> None:
    """Every limit maps to its §3 environment variable, and every variable to a limit."""
    assert dict(RISK_ENV_VARS) == {
        "max_attempts_per_hour": "KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR",
        "max_attempts_per_day": "KALSHI_RISK_MAX_ATTEMPTS_PER_DAY",
        "max_attempts_per_ticker_per_day": "KALSHI_RISK_MAX_ATTEMPTS_PER_TICKER_PER_DAY",
        "max_attempts_per_event_per_day": "KALSHI_RISK_MAX_ATTEMPTS_PER_EVENT_PER_DAY",
        "max_attempts_per_correlation_group_per_day": (
            "KALSHI_RISK_MAX_ATTEMPTS_PER_CORRELATION_GROUP_PER_DAY"
        ),
        "max_notional_per_day_dollars": "KALSHI_RISK_MAX_NOTIONAL_PER_DAY_DOLLARS",
        "max_concurrent_dispatches": "KALSHI_RISK_MAX_CONCURRENT_DISPATCHES",
        "max_position_contracts_per_ticker": "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER",
        "max_position_contracts_per_event": "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_EVENT",
        "max_position_contracts_per_correlation_group": (
            "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_CORRELATION_GROUP"
        ),
        "refire_cooldown_s": "KALSHI_RISK_REFIRE_COOLDOWN_SECONDS",
    }
    assert set(RISK_ENV_VARS) == {field.name for field in dataclasses.fields(RiskLimits)}


def test_defaults_are_the_specs() -> None:
    """The limits default to §3's values."""
    assert dataclasses.astuple(RiskLimits()) == (10, 50, 5, 6, 10, 50.0, 2, 5.0, 6.0, 10.0, 60.0)


@pytest.mark.parametrize(
    ("ticker", "event"),
    [
        ("KXHIGH-25NOV30-B40", "KXHIGH-25NOV30"),
        ("KXA-B", "KXA"),
        ("KXSOLO", "KXSOLO"),
        ("KX--", "KX-"),
    ],
)
def test_the_event_is_the_ticker_without_its_last_suffix(ticker: str, event: str) -> None:
    """The event drops the last -suffix; a ticker without a hyphen is its own event."""
    assert event_of(ticker) == event


def test_a_fresh_gate_allows_an_ordinary_order() -> None:
    """Nothing recorded, an allowed exchange, small notional: no reason."""
    assert check(make_gate()) is None


# --- one test per rule, each tripping only that rule ---


def test_rule_1_exchange_index_not_allowed() -> None:
    """An exchange index outside the allowed set is refused with the sorted set."""
    assert check(make_gate(), exchange_index=3) == "exchange_index=3 not in allowed [0, 2]"


def test_rule_1_unknown_shard_says_why() -> None:
    """Index -1 (auto) gets the unverifiable-shard explanation."""
    assert check(make_gate(), exchange_index=-1) == (
        "exchange_index=-1 not in allowed [0, 2] (unknown shard cannot be verified as funded)"
    )


def test_rule_2_too_many_dispatches_in_flight() -> None:
    """In-flight dispatches at the maximum refuse the next; finishing one frees a slot."""
    gate = make_gate()
    gate.dispatch_started()
    assert check(gate) is None
    gate.dispatch_started()
    assert gate.in_flight == 2
    assert check(gate) == "2 dispatches already in flight (max 2)"
    gate.dispatch_finished()
    assert gate.in_flight == 1
    assert check(gate) is None


def test_rule_3_cooldown_on_ticker_and_direction() -> None:
    """A second attempt on the same (ticker, direction) within the cooldown is refused."""
    gate = make_gate()
    attempt(gate, "KXA-25NOV30-B40", T0)
    assert check(gate, now_ms=T0 + 12_345) == (
        "cooldown: last yes attempt on KXA-25NOV30-B40 was 12.3s ago (min 60s)"
    )
    # The other direction and another ticker are not cooling down.
    assert check(gate, direction="no", now_ms=T0 + 12_345) is None
    assert check(gate, "KXA-25NOV30-B41", now_ms=T0 + 12_345) is None


def test_rule_3_cooldown_expires() -> None:
    """At exactly the cooldown the same (ticker, direction) may go again."""
    gate = make_gate()
    attempt(gate, "KXA-25NOV30-B40", T0)
    assert check(gate, now_ms=T0 + MINUTE_MS - 1) is not None
    assert check(gate, now_ms=T0 + MINUTE_MS) is None


def test_rule_5_attempts_in_the_last_hour() -> None:
    """Attempts in the last hour at the maximum refuse; an hour later they no longer count."""
    gate = make_gate(max_attempts_per_hour=2)
    attempt(gate, "KXA-X", T0)
    attempt(gate, "KXB-X", T0 + MINUTE_MS)
    now = T0 + 2 * MINUTE_MS
    assert check(gate, "KXC-X", now_ms=now) == "2 attempts in the last hour (max 2)"
    assert check(gate, "KXC-X", now_ms=T0 + HOUR_MS) is None


def test_rule_6_attempts_in_the_last_day() -> None:
    """Attempts in 24 h at the maximum refuse, even when spread beyond the hour."""
    gate = make_gate(max_attempts_per_day=3)
    for index, ticker in enumerate(["KXA-X", "KXB-X", "KXC-X"]):
        attempt(gate, ticker, T0 + index * HOUR_MS)
    assert check(gate, "KXD-X", now_ms=T0 + 5 * HOUR_MS) == "3 attempts in the last 24h (max 3)"


def test_rule_7_attempts_on_the_ticker() -> None:
    """Attempts on one ticker at the maximum refuse it; another ticker of another event is fine."""
    gate = make_gate(max_attempts_per_ticker_per_day=2)
    attempt(gate, "KXA-X", T0, direction="yes")
    attempt(gate, "KXA-X", T0, direction="no")
    now = T0 + 2 * MINUTE_MS
    assert check(gate, "KXA-X", now_ms=now) == "2 attempts on KXA-X in the last 24h (max 2)"
    assert check(gate, "KXB-X", now_ms=now) is None


def test_rule_8_attempts_across_the_event() -> None:
    """Attempts across one event (several tickers) at the maximum refuse a new ticker in it."""
    gate = make_gate(max_attempts_per_event_per_day=2)
    attempt(gate, "KXEV-25NOV30-A", T0)
    attempt(gate, "KXEV-25NOV30-B", T0)
    now = T0 + 2 * MINUTE_MS
    assert check(gate, "KXEV-25NOV30-C", now_ms=now) == (
        "2 attempts across event 'KXEV-25NOV30' in the last 24h (max 2)"
    )
    assert check(gate, "KXEV-25DEC01-C", now_ms=now) is None


def test_rule_9_attempts_across_the_correlation_group() -> None:
    """Attempts across one group at the maximum refuse; an empty group is never a group."""
    gate = make_gate(max_attempts_per_correlation_group_per_day=2)
    attempt(gate, "KXA-X", T0, group="btc-daily")
    attempt(gate, "KXB-X", T0, group="btc-daily")
    now = T0 + 2 * MINUTE_MS
    assert check(gate, "KXC-X", now_ms=now, group="btc-daily") == (
        "2 attempts across correlation group 'btc-daily' in the last 24h (max 2)"
    )
    assert check(gate, "KXC-X", now_ms=now, group="eth-daily") is None
    assert check(gate, "KXC-X", now_ms=now, group="") is None


def test_an_empty_group_collects_no_attempts() -> None:
    """Attempts without a group do not add up under the empty name."""
    gate = make_gate(max_attempts_per_correlation_group_per_day=1)
    attempt(gate, "KXA-X", T0)
    attempt(gate, "KXB-X", T0)
    assert check(gate, "KXC-X", now_ms=T0 + 2 * MINUTE_MS) is None


def test_rule_10_daily_notional() -> None:
    """Recorded notional plus this order's count x price above the maximum is refused."""
    gate = make_gate(max_notional_per_day_dollars=5.0)
    attempt(gate, "KXA-X", T0, count=10, price=0.45)
    now = T0 + 2 * MINUTE_MS
    assert check(gate, "KXB-X", count=2, price=0.40, now_ms=now) == (
        "daily notional would reach $5.30 (max $5.00)"
    )
    # Reaching the maximum exactly is allowed.
    assert check(gate, "KXB-X", count=1, price=0.50, now_ms=now) is None


def test_rule_11_position_on_the_ticker() -> None:
    """Filled contracts on a ticker plus this order above the maximum are refused."""
    gate = make_gate()
    gate.record_fill("KXA-X", 4.0, T0, "")
    assert check(gate, "KXA-X", count=2, now_ms=T0 + 1) == (
        "position on KXA-X would reach 6 contracts (max 5)"
    )
    assert check(gate, "KXA-X", count=1, now_ms=T0 + 1) is None


def test_rule_12_position_across_the_event() -> None:
    """Fills across an event's tickers plus this order above the maximum are refused."""
    gate = make_gate()
    gate.record_fill("KXEV-A", 3.0, T0, "")
    gate.record_fill("KXEV-B", 2.0, T0, "")
    assert check(gate, "KXEV-C", count=2, now_ms=T0 + 1) == (
        "position across event 'KXEV' would reach 7 contracts (max 6)"
    )
    assert check(gate, "KXEV-C", count=1, now_ms=T0 + 1) is None


def test_rule_13_position_across_the_correlation_group() -> None:
    """Fills across a group's events plus this order above the maximum are refused."""
    gate = make_gate()
    gate.record_fill("KXA-X", 4.0, T0, "btc")
    gate.record_fill("KXB-X", 4.0, T0, "btc")
    assert check(gate, "KXC-X", count=3, now_ms=T0 + 1, group="btc") == (
        "position across correlation group 'btc' would reach 11 contracts (max 10)"
    )
    assert check(gate, "KXC-X", count=3, now_ms=T0 + 1, group="") is None
    assert check(gate, "KXC-X", count=2, now_ms=T0 + 1, group="btc") is None


def test_a_kill_is_not_a_fill() -> None:
    """A fill_count of 0 changes no position."""
    gate = make_gate(max_position_contracts_per_ticker=1)
    gate.record_fill("KXA-X", 0.0, T0, "")
    assert check(gate, "KXA-X", count=1, now_ms=T0 + 1) is None


# --- order of the rules ---


@pytest.mark.parametrize(
    ("expected_start", "setup"),
    [
        ("exchange_index=", "in_flight"),
        ("2 dispatches", "cooldown"),
        ("cooldown:", "hour"),
        ("1 attempts in the last hour", "ticker"),
    ],
)
def test_the_first_failing_rule_wins(expected_start: str, setup: str) -> None:
    """With two rules failing, the reason is the earlier rule's."""
    gate = make_gate(max_attempts_per_hour=1, max_attempts_per_ticker_per_day=1)
    now = T0 + MINUTE_MS // 2
    exchange_index = 0
    if setup == "in_flight":  # rule 1 and rule 2
        exchange_index = 7
        gate.dispatch_started()
        gate.dispatch_started()
    elif setup == "cooldown":  # rule 2 and rule 3
        gate.dispatch_started()
        gate.dispatch_started()
        attempt(gate, "KXA-X", T0)
    elif setup == "hour":  # rule 3 and rule 5
        attempt(gate, "KXA-X", T0)
    else:  # rule 5 and rule 7 (cooldown passed)
        attempt(gate, "KXA-X", T0)
        now = T0 + 2 * MINUTE_MS
    reason = check(gate, "KXA-X", exchange_index=exchange_index, now_ms=now)
    assert reason is not None
    assert reason.startswith(expected_start), reason


def test_attempt_limits_come_before_notional_and_positions() -> None:
    """A ticker over both its attempt count and its position reports the attempts (rule 7)."""
    gate = make_gate(max_attempts_per_ticker_per_day=1, max_notional_per_day_dollars=0.1)
    attempt(gate, "KXA-X", T0)
    gate.record_fill("KXA-X", 5.0, T0, "")
    reason = check(gate, "KXA-X", now_ms=T0 + 2 * MINUTE_MS)
    assert reason == "1 attempts on KXA-X in the last 24h (max 1)"


# --- windows ---


def test_attempts_notional_and_fills_leave_after_24_hours() -> None:
    """After 24 h every attempt, its notional and every fill stop counting."""
    gate = make_gate(max_attempts_per_day=1, max_notional_per_day_dollars=1.0)
    attempt(gate, "KXA-X", T0, count=2, price=0.45)
    gate.record_fill("KXA-X", 5.0, T0, "")
    assert check(gate, "KXA-X", now_ms=T0 + DAY_MS - 1) == "1 attempts in the last 24h (max 1)"
    assert check(gate, "KXA-X", count=1, price=0.99, now_ms=T0 + DAY_MS) is None


def test_pruning_keeps_attempts_inside_the_window() -> None:
    """Only the attempts older than 24 h leave; younger ones keep counting."""
    gate = make_gate(max_attempts_per_day=2, max_attempts_per_hour=100)
    attempt(gate, "KXA-X", T0)
    attempt(gate, "KXB-X", T0 + HOUR_MS)
    attempt(gate, "KXC-X", T0 + 2 * HOUR_MS)
    # At T0 + 24 h the first has left; two remain.
    assert check(gate, "KXD-X", now_ms=T0 + DAY_MS) == "2 attempts in the last 24h (max 2)"
    assert check(gate, "KXD-X", now_ms=T0 + DAY_MS + HOUR_MS) is None


# --- reconciliation ---


def test_reconciliation_replaces_fills_up_to_its_time() -> None:
    """After a reconciliation, position = reconciled + fills newer than it."""
    gate = make_gate()
    gate.record_fill("KXA-X", 4.0, T0, "")
    gate.reconcile({"KXA-X": 1.0}, as_of_ms=T0 + 1000)
    # The earlier fill is inside the reconciled figure: 1 + 4 = 5 is allowed.
    assert check(gate, "KXA-X", count=4, now_ms=T0 + 2000) is None
    assert check(gate, "KXA-X", count=5, now_ms=T0 + 2000) == (
        "position on KXA-X would reach 6 contracts (max 5)"
    )
    gate.record_fill("KXA-X", 2.0, T0 + 3000, "")
    assert check(gate, "KXA-X", count=3, now_ms=T0 + 4000) == (
        "position on KXA-X would reach 6 contracts (max 5)"
    )


def test_a_fill_after_the_polls_issue_time_still_counts() -> None:
    """A fill recorded after the reconciliation's as-of time is added to it."""
    gate = make_gate()
    gate.record_fill("KXA-X", 3.0, T0 + 5000, "")
    gate.reconcile({"KXA-X": 1.0}, as_of_ms=T0 + 4000)
    assert check(gate, "KXA-X", count=2, now_ms=T0 + 6000) == (
        "position on KXA-X would reach 6 contracts (max 5)"
    )


def test_reconciled_positions_count_across_event_and_group() -> None:
    """Reconciled tickers add up across their event, and across a group they are known in."""
    gate = make_gate()
    attempt(gate, "KXG-A", T0 - DAY_MS // 2, group="btc")
    gate.reconcile({"KXEV-A": 3.0, "KXEV-B": 3.0, "KXG-A": 5.0}, as_of_ms=T0)
    assert check(gate, "KXEV-C", now_ms=T0 + 1) == (
        "position across event 'KXEV' would reach 7 contracts (max 6)"
    )
    gate.record_fill("KXH-B", 5.0, T0 + 2, "btc")
    assert check(gate, "KXJ-C", now_ms=T0 + 3, group="btc") == (
        "position across correlation group 'btc' would reach 11 contracts (max 10)"
    )


def test_a_new_reconciliation_forgets_tickers_no_longer_held() -> None:
    """A ticker absent from the latest reconciliation holds nothing."""
    gate = make_gate()
    gate.reconcile({"KXA-X": 5.0}, as_of_ms=T0)
    assert check(gate, "KXA-X", now_ms=T0 + 1) is not None
    gate.reconcile({}, as_of_ms=T0 + 2)
    assert check(gate, "KXA-X", now_ms=T0 + 3) is None


# --- warm start ---


def past(ticker: str, at_ms: int, *, fill: float = 0.0, group: str = "") -> PastOrder:
    return PastOrder(ticker, group, "yes", 1.0, 0.40, fill, at_ms)


def test_warm_start_replays_attempts_cooldowns_and_fills() -> None:
    """Replayed orders count as attempts (with cooldowns) and their fills as positions."""
    gate = make_gate(max_attempts_per_ticker_per_day=2)
    gate.warm_start([past("KXA-X", T0 - 10_000, fill=1.0), past("KXB-X", T0 - HOUR_MS, fill=4.0)])
    assert check(gate, "KXA-X", now_ms=T0) == (
        "cooldown: last yes attempt on KXA-X was 10.0s ago (min 60s)"
    )
    assert check(gate, "KXB-X", count=2, now_ms=T0) == (
        "position on KXB-X would reach 6 contracts (max 5)"
    )
    gate.warm_start([past("KXA-X", T0 - 5 * MINUTE_MS)])
    assert check(gate, "KXA-X", now_ms=T0 + MINUTE_MS) == (
        "2 attempts on KXA-X in the last 24h (max 2)"
    )


def order(client_order_id: str, requested_at_ms: int, **changes: Any) -> OrderRow:
    """A pending order row for the warm-start file."""
    fields: dict[str, Any] = {
        "correlation_id": f"corr-{client_order_id}",
        "client_order_id": client_order_id,
        "ticker": "KXA-25NOV30-B40",
        "correlation_group": None,
        "requested_at_ms": requested_at_ms,
    }
    return order_row(**{**fields, **changes})


async def test_load_recent_orders_reads_what_the_writer_wrote(tmp_path: Path) -> None:
    """The warm start reads the writer's non-rejected rows of the last 24 h, oldest first."""
    path = tmp_path / "telemetry.db"
    now = T0
    async with running_telemetry(path) as telemetry:
        telemetry.record_pending(order("old", now - DAY_MS))  # exactly 24 h old: out
        telemetry.record_pending(order("filled", now - HOUR_MS))
        await telemetry.record_order(
            order(
                "filled",
                now - HOUR_MS,
                kind=OrderRowKind.RESOLUTION,
                status=OrderStatus.FILLED,
                fill_count="3.00",
                correlation_group="btc",
                ticker="KXB-25NOV30-T1",
                outcome_side="no",
            )
        )
        await telemetry.record_order(
            order(
                "rejected",
                now - MINUTE_MS,
                kind=OrderRowKind.REJECTED,
                status=OrderStatus.REJECTED,
                error_message="risk gate: cooldown",
            )
        )
        telemetry.record_pending(order("pending", now - 2 * MINUTE_MS, count="2.00"))
        telemetry.close()

    recent = await trio.to_thread.run_sync(load_recent_orders, path, now)
    assert recent == [
        PastOrder("KXB-25NOV30-T1", "btc", "no", 3.0, 0.42, 3.0, now - HOUR_MS),
        PastOrder("KXA-25NOV30-B40", "", "yes", 2.0, 0.42, 0.0, now - 2 * MINUTE_MS),
    ]
    # The same rows with the clock 24 h on: all out of the window.
    assert await trio.to_thread.run_sync(load_recent_orders, path, now + DAY_MS) == []

    gate = make_gate(refire_cooldown_s=600)
    gate.warm_start(recent)
    assert check(gate, "KXA-25NOV30-B40", now_ms=now) == (
        "cooldown: last yes attempt on KXA-25NOV30-B40 was 120.0s ago (min 600s)"
    )
    assert check(gate, "KXB-25NOV30-T1", direction="yes", count=3, now_ms=now) == (
        "position on KXB-25NOV30-T1 would reach 6 contracts (max 5)"
    )


async def test_load_recent_orders_reads_a_file_the_writer_holds_open(tmp_path: Path) -> None:
    """The read-only warm start reads committed rows while telemetry has the WAL file open."""
    path = tmp_path / "telemetry.db"
    async with running_telemetry(path) as telemetry:
        await telemetry.record_order(order("live", T0 - MINUTE_MS))
        with trio.fail_after(30):
            while telemetry.statistics().order_rows_written < 1:  # noqa: ASYNC110 (worker thread)
                await trio.sleep(0.01)
        recent = await trio.to_thread.run_sync(load_recent_orders, path, T0)
        telemetry.close()

    assert [order.requested_at_ms for order in recent] == [T0 - MINUTE_MS]


def test_load_recent_orders_on_a_missing_file_is_empty(tmp_path: Path) -> None:
    """No file yet: nothing to replay, and no file is created."""
    path = tmp_path / "absent.db"
    assert load_recent_orders(path, T0) == []
    assert not path.exists()


def test_load_recent_orders_without_the_table_is_empty(tmp_path: Path) -> None:
    """A database without orders_fired (an older reference file) gives nothing to replay."""
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE other (x INTEGER)")
        connection.commit()
    assert load_recent_orders(path, T0) == []


def test_load_recent_orders_never_writes(tmp_path: Path) -> None:
    """The file is opened read-only: its bytes are unchanged by the read."""
    path = tmp_path / "empty.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE other (x INTEGER)")
        connection.commit()
    before = path.read_bytes()
    load_recent_orders(path, T0)
    assert path.read_bytes() == before


def test_a_groups_tickers_are_forgotten_once_nothing_names_them_or_is_held() -> None:
    """A thousand one-off groups whose attempts left the day, with nothing held, leave nothing
    behind; a group whose ticker is still held keeps it, and its position still counts it (the
    negative twin)."""
    gate = make_gate(max_position_contracts_per_correlation_group=5.0)
    for index in range(1000):
        attempt(gate, f"KXG{index}-25NOV30-B40", T0, group=f"one-off-{index}")
    attempt(gate, "KXHELD-25NOV30-B40", T0, group="held")
    later = T0 + DAY_MS + MINUTE_MS
    assert check(gate, now_ms=later) is None  # prunes the day's attempts
    gate.reconcile({"KXHELD-25NOV30-B40": 5.0}, later)
    assert gate._group_tickers == {"held": {"KXHELD-25NOV30-B40"}}
    reason = check(gate, "KXOTHER-25NOV30-B40", now_ms=later, group="held")
    assert reason is not None and "correlation group 'held'" in reason


async def test_error_rows_of_the_last_day_count_in_attempts_and_notional(tmp_path: Path) -> None:
    """An attempt that may have placed an order (its row ``error``) counts at the warm start: it
    is read back, and the gate's daily notional and attempts include it."""
    path = tmp_path / "telemetry.db"
    async with running_telemetry(path) as telemetry:
        await telemetry.record_order(
            order(
                "unknown",
                T0 - HOUR_MS,
                kind=OrderRowKind.RESOLUTION,
                status=OrderStatus.ERROR,
                error_message="outcome unknown: read timed out",
                count="10.00",
                price_dollars="0.5000",
            )
        )
        telemetry.close()
    recent = await trio.to_thread.run_sync(load_recent_orders, path, T0)
    assert [(past.count, past.price) for past in recent] == [(10.0, 0.5)]
    gate = make_gate(max_notional_per_day_dollars=5.0, max_attempts_per_day=1)
    gate.warm_start(recent)
    assert check(gate, "KXZ-25NOV30-B40", now_ms=T0) == "1 attempts in the last 24h (max 1)"
    gate = make_gate(max_notional_per_day_dollars=5.2)
    gate.warm_start(recent)
    assert check(gate, "KXZ-25NOV30-B40", price=0.5, now_ms=T0) == (
        "daily notional would reach $5.50 (max $5.20)"
    )
