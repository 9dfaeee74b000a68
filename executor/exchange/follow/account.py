"""The account poll and the heartbeat: two background tasks of an executor with an exchange.

``serve_account`` polls the balance and the open positions once before the executor serves and
then every ``ACCOUNT_POLL_INTERVAL_S`` (DISPATCH.md §7): the balance feeds sizing, the positions
feed the risk gate's reconciliation, stamped with the time the request was *issued* (a fill the
exchange booked after that moment is not in the answer, so the gate keeps counting it). A failed
poll keeps the last good values, logs (rate-limited) and tries again at the next interval; it never
stops the executor.

With each poll (after the first), the orders still resting on the book are looked at too
(``follow_resting``: ``executor.exchange.follow.reconcile.Reconciler.poll_resting``), so a
good_till_canceled order's later fill or cancellation reaches its row and the risk gate.

``serve_heartbeats`` writes the ``heartbeats`` row (``process = 'executor:SOCKET'``) every
``HEARTBEAT_INTERVAL_S``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

import structlog
import trio

from executor.clock import wall_ms
from executor.decide.risk import RiskGate
from executor.exchange.protocols import OrderSink
from executor.recording.rows import HeartbeatRow

log = structlog.get_logger()

ACCOUNT_POLL_INTERVAL_S: Final = 30.0
"""Seconds between account polls (the reference's interval): balances move with fills, which the
gate already counts between polls."""

HEARTBEAT_INTERVAL_S: Final = 10.0
"""Seconds between heartbeat rows (the reference's interval)."""

POLL_WARNING_INTERVAL_S: Final = 300.0
"""At most one failed-poll warning per this many seconds (ten polls): an exchange outage must not
flood the log. A judgement call."""

HEARTBEAT_PROCESS: Final = "executor"
"""``heartbeats.process`` of an executor (the reference's name for it), alone when no instance is
known (a test's), else followed by the instance (:func:`heartbeat_process_for`)."""


def heartbeat_process_for(socket_path: Path) -> str:
    """``heartbeats.process`` of the executor serving ``socket_path``: ``executor:`` and the
    socket's absolute path. The socket names the instance (one executor at a time holds it), so
    two executors that have written one file are two rows, and a restart replaces its own row."""
    return f"{HEARTBEAT_PROCESS}:{os.path.abspath(socket_path)}"


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


async def serve_heartbeats(
    sink: OrderSink,
    queue_depth: Callable[[], int],
    dropped_rows: Callable[[], int],
    *,
    interval_s: float = HEARTBEAT_INTERVAL_S,
    process: str = HEARTBEAT_PROCESS,
    lookups_unknown: Callable[[], int] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Write the heartbeat row of ``process`` now and every ``interval_s`` until cancelled;
    ``started_at_ms`` is when this run began. ``lookups_unknown``, when given, is read into
    each row too (the executor's own counters table beside the reference's heartbeats)."""
    started_at_ms = wall_ms()
    pid = os.getpid()
    task_status.started()
    while True:
        row = HeartbeatRow(
            process=process,
            pid=pid,
            started_at_ms=started_at_ms,
            beat_at_ms=wall_ms(),
            queue_depth=queue_depth(),
            dropped_rows=dropped_rows(),
            lookups_unknown=None if lookups_unknown is None else lookups_unknown(),
        )
        await sink.record_order(row)
        await trio.sleep(interval_s)
