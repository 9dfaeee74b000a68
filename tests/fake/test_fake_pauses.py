"""The fake exchange's pauses without I/O: the weekly window, the published status, refusals."""

from __future__ import annotations

import datetime

import pytest

from executor.fake.book.control import (
    EXCHANGE_PAUSED_CODE,
    TRADING_PAUSED_CODE,
    ExchangePauses,
    in_weekly_pause,
)
from executor.fake.routes import ErrorReply
from tests.support.openapi import validate_response

STATUS_PATH = "/exchange/status"


def ms(text: str) -> int:
    """An ISO time with its zone as Unix ms."""
    return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize(
    ("moment", "paused"),
    [
        ("2026-12-10T03:00:00-05:00", True),  # Thursday 03:00 EST: the window opens
        ("2026-12-10T04:59:59-05:00", True),
        ("2026-12-10T05:00:00-05:00", False),  # its end is excluded
        ("2026-12-10T02:59:59-05:00", False),
        ("2026-12-09T03:30:00-05:00", False),  # a Wednesday
        ("2026-07-09T03:30:00-04:00", True),  # Thursday in summer time (EDT)
        ("2026-07-09T07:30:00+00:00", True),  # the same moment in UTC
        ("2026-07-09T03:30:00+00:00", False),  # 03:30 UTC is 23:30 ET on Wednesday
    ],
)
def test_the_weekly_pause_is_thursday_three_to_five_eastern(moment: str, paused: bool) -> None:
    """The window is read in New York time, summer and winter, its end excluded."""
    assert in_weekly_pause(ms(moment)) is paused


def test_the_weekly_pause_drives_the_status_and_refuses_orders_not_cancels() -> None:
    """With the weekly schedule on, inside the window: trading inactive, the exchange active, a
    resume time at 05:00 ET; an order is refused (400), a cancel is not; outside it, active."""
    now = [ms("2026-12-10T03:30:00-05:00")]
    pauses = ExchangePauses(lambda: now[0], weekly=True)
    status = pauses.status()
    validate_response(STATUS_PATH, "GET", 200, status)
    assert status == {
        "exchange_active": True,
        "trading_active": False,
        "exchange_estimated_resume_time": "2026-12-10T10:00:00Z",
    }
    with pytest.raises(ErrorReply) as refused:
        pauses.refuse_placing()
    assert (refused.value.status, refused.value.code) == (400, TRADING_PAUSED_CODE)
    pauses.refuse_changes()  # a trading pause lets cancels through
    now[0] = ms("2026-12-10T05:00:00-05:00")
    assert pauses.status() == {"exchange_active": True, "trading_active": True}
    pauses.refuse_placing()


def test_an_exchange_pause_by_hand_refuses_everything_until_lifted() -> None:
    """Paused by hand (exchange): both flags false, orders and cancels refused; lifted, active."""
    pauses = ExchangePauses(lambda: ms("2026-12-08T12:00:00+00:00"))
    pauses.pause("exchange", "2026-12-08T13:00:00Z")
    status = pauses.status()
    validate_response(STATUS_PATH, "GET", 200, status)
    assert (status["exchange_active"], status["trading_active"]) == (False, False)
    for refuse in (pauses.refuse_placing, pauses.refuse_changes):
        with pytest.raises(ErrorReply) as refused:
            refuse()
        assert refused.value.code == EXCHANGE_PAUSED_CODE
    pauses.pause(None)
    assert pauses.status() == {"exchange_active": True, "trading_active": True}
