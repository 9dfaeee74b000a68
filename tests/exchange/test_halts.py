"""The exchange's halts as plain state: what each source says, and one line per halt.

Pure: no sockets, no tasks; log lines are captured with structlog's testing helper.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from executor.exchange.halts import ExchangeHalts, RefusalSign, refusal_kind

GROUP = "og-1"


@pytest.mark.parametrize(
    ("text", "sign"),
    [
        ("400 order_group_triggered: order group og-1 is triggered", RefusalSign.GROUP_TRIGGERED),
        ("400 Bad Request: the order group is triggered", RefusalSign.GROUP_TRIGGERED),
        ("400 trading_is_paused: trading is paused", RefusalSign.PAUSED),
        ("400 exchange_paused: nothing changes", RefusalSign.PAUSED),
        ("400 insufficient_balance: order costs 300 cents", None),
        ("503 Service Unavailable", None),
    ],
)
def test_an_order_refusal_is_read_for_a_halt(text: str, sign: RefusalSign | None) -> None:
    """The refusal's code or words say a group trigger or a pause; any other refusal says
    neither (the negative twins)."""
    assert refusal_kind(text) is sign


def test_a_trigger_heard_twice_and_from_an_order_is_one_warning_saying_how_to_resume() -> None:
    """The exchange's trigger, heard on the stream and again from an order's refusal: one
    WARNING line naming the group and the resume command; the reset: one INFO line."""
    halts = ExchangeHalts(GROUP)
    with capture_logs() as logs:
        halts.hear_group_event("triggered", GROUP)
        halts.hear_group_event("triggered", GROUP)
        halts.hear_order_refusal("400 order_group_triggered: order group og-1 is triggered")
        assert halts.group_tripped and halts.group_tripped_by == "stream"
        halts.hear_group_event("reset", GROUP)
    warnings = [line for line in logs if line["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["order_group_id"] == GROUP
    assert "executor group reset" in warnings[0]["resume"]
    assert [line["log_level"] for line in logs] == ["warning", "info"]
    assert not halts.group_tripped and halts.group_halts == 1


def test_another_groups_events_change_nothing() -> None:
    """A trigger of a group that is not this run's (another client of the account) is no halt."""
    halts = ExchangeHalts(GROUP)
    halts.hear_group_event("triggered", "og-other")
    assert halts.group_halt() is None


def test_this_executors_own_trigger_heard_back_is_not_the_exchanges() -> None:
    """While the guard holds its own trigger, the ``triggered`` echo is no halt; the guard's own
    reset clears even an exchange trigger heard before it."""
    halts = ExchangeHalts(GROUP)
    halts.own_trigger(True)
    halts.hear_group_event("triggered", GROUP)
    halts.hear_order_refusal("400 order_group_triggered: triggered")
    assert not halts.group_tripped
    halts.own_trigger(False)
    halts.hear_group_event("triggered", GROUP)
    assert halts.group_tripped
    halts.own_reset()
    assert not halts.group_tripped


def test_the_operators_reset_clears_the_exchanges_trigger_in_one_info_line() -> None:
    """``executor group reset``'s signal ends a halt heard from an order's refusal: one INFO
    line, fires allowed again; a second signal says nothing more."""
    halts = ExchangeHalts(GROUP)
    halts.hear_order_refusal("400 order_group_triggered: order group og-1 is triggered")
    with capture_logs() as logs:
        halts.operator_reset()
        halts.operator_reset()
    assert halts.group_halt() is None
    assert [
        (line["event"], line["log_level"]) for line in logs if line["log_level"] != "debug"
    ] == [("order group reset by the operator: real fires go out again", "info")]


def test_the_operators_reset_leaves_this_executors_own_trigger_alone() -> None:
    """While the guard holds its own trigger (the kill switch), the operator's reset changes
    nothing: the guard's echo heard after it is still no halt of the exchange's."""
    halts = ExchangeHalts(GROUP)
    halts.own_trigger(True)
    with capture_logs() as logs:
        halts.operator_reset()
    assert [line["log_level"] for line in logs] == ["debug"]
    halts.hear_group_event("triggered", GROUP)
    assert not halts.group_tripped


def test_without_a_group_no_refusal_halts() -> None:
    """With no order group (limit 0) an order refused as "triggered" cannot be ours: no halt."""
    halts = ExchangeHalts(None)
    halts.hear_order_refusal("400 order_group_triggered: triggered")
    assert halts.group_halt() is None


def test_a_pause_refusal_asks_for_the_status_and_a_pause_is_one_warning() -> None:
    """An order refused as paused asks for a status read; the status read paused is one WARNING,
    the status read active again one INFO, and the pause is counted once."""
    hints: list[None] = []
    halts = ExchangeHalts(GROUP, on_pause_hint=lambda: hints.append(None))
    halts.hear_order_refusal("400 trading_is_paused: trading is paused")
    assert hints == [None] and not halts.paused  # only the status says it is paused
    with capture_logs() as logs:
        for _ in range(2):
            halts.hear_status(exchange_active=True, trading_active=False, resume_time=None)
        assert halts.trading_pause() == "trading paused by the exchange"
        halts.hear_status(exchange_active=True, trading_active=True, resume_time="ignored")
    assert [line["log_level"] for line in logs] == ["warning", "info"]
    assert halts.pauses == 1 and halts.trading_pause() is None and halts.resume_time is None


def test_an_exchange_pause_is_named_as_such() -> None:
    """exchange_active false is an exchange pause (nothing allowed), not a trading pause."""
    halts = ExchangeHalts(GROUP)
    halts.hear_status(exchange_active=False, trading_active=False, resume_time=None)
    assert halts.trading_pause() == "exchange paused by the exchange"
