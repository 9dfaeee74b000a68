"""The account poll: a background task of an executor with an exchange.

``serve_account`` polls the balance and the open positions once before the executor serves and
then every ``ACCOUNT_POLL_INTERVAL_S`` (DISPATCH.md §7): the balance feeds sizing, the positions
feed the risk gate's reconciliation, stamped with the time the request was *issued* (a fill the
exchange booked after that moment is not in the answer, so the gate keeps counting it). A failed
poll keeps the last good values, logs (rate-limited) and tries again at the next interval; it never
stops the executor.

With each poll (after the first), the orders still resting on the book are looked at too
(``follow_resting``: ``executor.exchange.follow.reconcile.Reconciler.poll_resting``), so a
good_till_canceled order's later fill or cancellation reaches its row and the risk gate.

(The heartbeat, which ran beside it, is a recording job: ``executor.recording.heartbeat``.)
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

import structlog
import trio

from executor.clock import wall_ms
from executor.decide.risk import RiskGate

log = structlog.get_logger()

ACCOUNT_POLL_INTERVAL_S: Final = 30.0
"""Seconds between account polls (the reference's interval): balances move with fills, which the
gate already counts between polls."""

POLL_WARNING_INTERVAL_S: Final = 300.0
"""At most one failed-poll warning per this many seconds (ten polls): an exchange outage must not
flood the log. A judgement call."""


class AccountSource(Protocol):
    """The part of ``executor.exchange.orders.transport.ExchangeClient`` the poll uses."""

    async def get_balance_cents(self) -> int: ...

    async def get_positions(self) -> dict[str, float]: ...


@dataclass(slots=True)
class AccountState:
    """The last good account figures (zero until the first successful poll)."""

    balance_dollars: float = 0.0
    positions: dict[str, float] = field(default_factory=dict)
    polls_ok: int = 0
    polls_failed: int = 0


class _RateLimitedWarning:
    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._next = float("-inf")
        self._held = 0

    def warn(self, event: str, **fields: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._held += 1
            return
        log.warning(event, suppressed=self._held, **fields)
        self._held = 0
        self._next = now + self._interval_s


async def poll_account_once(
    client: AccountSource,
    state: AccountState,
    risk: RiskGate | None,
    warnings: _RateLimitedWarning | None = None,
) -> bool:
    """One poll: update ``state`` and reconcile ``risk``; False (values kept) when it failed."""
    issued_at_ms = wall_ms()
    try:
        balance_cents = await client.get_balance_cents()
        positions = await client.get_positions()
    except Exception as error:
        state.polls_failed += 1
        (warnings or _RateLimitedWarning(0.0)).warn(
            "account poll failed: keeping the last values", error=str(error) or repr(error)
        )
        return False
    state.balance_dollars = balance_cents / 100
    state.positions = positions
    state.polls_ok += 1
    if risk is not None:
        risk.reconcile(positions, issued_at_ms)
    return True


async def serve_account(
    client: AccountSource,
    state: AccountState,
    risk: RiskGate | None,
    *,
    interval_s: float | None = None,
    follow_resting: Callable[[], Awaitable[None]] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Poll once, report started, then poll every ``interval_s`` until cancelled.

    ``interval_s`` None is ``ACCOUNT_POLL_INTERVAL_S`` (read at the call). ``follow_resting``,
    when given, runs after every later poll (start-up has just reconciled the resting orders
    itself); an error in it is logged and the polling goes on.
    """
    if interval_s is None:
        interval_s = ACCOUNT_POLL_INTERVAL_S
    warnings = _RateLimitedWarning(POLL_WARNING_INTERVAL_S)
    resting_warnings = _RateLimitedWarning(POLL_WARNING_INTERVAL_S)
    if await poll_account_once(client, state, risk, warnings):
        log.info(
            "account polled", balance_dollars=state.balance_dollars, positions=len(state.positions)
        )
    task_status.started()
    while True:
        await trio.sleep(interval_s)
        await poll_account_once(client, state, risk, warnings)
        if follow_resting is not None:
            try:
                await follow_resting()
            except Exception as error:  # a bug there must not stop the balance and positions
                resting_warnings.warn("resting orders poll failed", error=repr(error))
