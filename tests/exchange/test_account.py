"""The account poll (DISPATCH.md §7), against in-test fakes."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import trio
import trio.testing
from structlog.testing import capture_logs

from executor.clock import wall_ms
from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.follow.account import (
    ACCOUNT_POLL_INTERVAL_S,
    AccountState,
    poll_account_once,
    serve_account,
)


@dataclass
class FakeAccount:
    """Answers balance and positions, or raises while ``failing``."""

    balance_cents: int = 123_456
    positions: dict[str, float] = field(default_factory=lambda: {"KXA-1": 3.0})
    failing: bool = False
    polls: int = 0

    async def get_balance_cents(self) -> int:
        await trio.lowlevel.checkpoint()
        self.polls += 1
        if self.failing:
            raise ConnectionError("exchange unreachable")
        return self.balance_cents

    async def get_positions(self) -> dict[str, float]:
        await trio.lowlevel.checkpoint()
        return dict(self.positions)


class RecordingGate(RiskGate):
    """A risk gate that remembers its reconciliations."""

    def __init__(self) -> None:
        super().__init__(RiskLimits(), frozenset({0}))
        self.reconciled: list[tuple[dict[str, float], int]] = []

    def reconcile(self, positions: Mapping[str, float], as_of_ms: int) -> None:
        self.reconciled.append((dict(positions), as_of_ms))
        super().reconcile(positions, as_of_ms)


async def test_poll_updates_balance_and_reconciles_at_issue_time() -> None:
    """A poll sets balance_dollars and hands the positions to the gate, stamped when issued."""
    state, gate = AccountState(), RecordingGate()
    before = wall_ms()
    assert await poll_account_once(FakeAccount(), state, gate)
    assert state.balance_dollars == 1234.56
    [(positions, as_of_ms)] = gate.reconciled
    assert positions == {"KXA-1": 3.0}
    assert before <= as_of_ms <= wall_ms()


async def test_failed_poll_keeps_the_last_values_and_logs() -> None:
    """A failed poll returns False, keeps the last good balance, and logs a warning."""
    account, state, gate = FakeAccount(), AccountState(), RecordingGate()
    await poll_account_once(account, state, gate)
    account.failing = True
    with capture_logs() as logs:
        assert not await poll_account_once(account, state, gate)
    assert state.balance_dollars == 1234.56
    assert (state.polls_ok, state.polls_failed) == (1, 1)
    assert len(gate.reconciled) == 1
    assert [log["event"] for log in logs] == ["account poll failed: keeping the last values"]


async def test_serve_account_polls_before_started_and_then_every_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The first poll is done by start(); later ones follow the interval, failing or not."""
    account, state = FakeAccount(), AccountState()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_account, account, state, None)
        assert (account.polls, state.balance_dollars) == (1, 1234.56)
        account.failing = True
        with capture_logs() as logs:
            await trio.sleep(ACCOUNT_POLL_INTERVAL_S * 3 + 1)
        assert account.polls == 4
        assert state.balance_dollars == 1234.56  # kept through the failures
        assert len(logs) == 1  # rate-limited: one warning for three failures
        nursery.cancel_scope.cancel()


async def test_resting_orders_are_followed_with_every_later_poll(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The resting-orders look runs after each poll but the first (start-up did that one), and
    one that raises is logged without stopping the balance and positions."""
    account, state = FakeAccount(), AccountState()
    looks: list[int] = []

    async def follow_resting() -> None:
        await trio.lowlevel.checkpoint()
        looks.append(account.polls)
        if len(looks) == 2:
            raise RuntimeError("bug in the follower")

    async with trio.open_nursery() as nursery:
        await nursery.start(
            functools.partial(serve_account, follow_resting=follow_resting),
            account,
            state,
            None,
        )
        assert looks == []
        with capture_logs() as logs:
            await trio.sleep(ACCOUNT_POLL_INTERVAL_S * 3 + 1)
        nursery.cancel_scope.cancel()
    assert looks == [2, 3, 4]
    assert [log["event"] for log in logs] == ["resting orders poll failed"]
