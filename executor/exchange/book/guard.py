"""The book guard: a running executor's halt carried to the exchange's book.

The kill switch and the audit trail stop real fires inside this process (the decision refuses
them). The guard makes the exchange hold the same line, in one task beside the account poll:

- **the kill switch engages**: with ``--cancel-resting-on-engage`` (on by default when orders rest,
  i.e. good_till_canceled) the resting orders this executor follows are cancelled with the V2
  batch cancel (``executor.exchange.book.cancels``; each cancel ends in the order's row), then the
  order group is triggered (the exchange cancels whatever of the group still rests, an order in
  flight included, and rejects new ones). With the flag explicitly off and orders that rest, neither
  happens: the operator asked for the book to be left alone. Released: the group is reset, and
  also when the exchange had triggered it by itself (``executor.exchange.halts``) and the switch
  was engaged meanwhile: engage then release is one way to resume after the exchange's halt.
- **the audit trail becomes unavailable**: the group is triggered (what rests cannot have its end
  recorded, so it should not rest); recovered: reset, unless the switch is still engaged.
- **an orderly shutdown** with ``--cancel-resting-on-exit``: the resting orders are cancelled
  (:meth:`BookGuard.cancel_at_exit`, after the fires are done, before telemetry closes).

The exchange's pauses (``executor.exchange.halts``): a trading pause allows cancels, so they go
out; an exchange pause refuses everything, so the engaged switch's cancels and the group's
trigger or reset wait for it to end (the first look after it acts) rather than be spent on
certain refusals, one ERROR line each look.

The guard looks every ``LOOK_INTERVAL_S`` and at once when :meth:`BookGuard.notify` is called
(every audit-trail transition calls it, through :meth:`BookGuard.hear_audit`); a trigger or reset
the exchange refused is asked again at the next look, a cancel at most once per order per
engagement.

Between a halt's end (the trail written again, the switch released) and the group's reset there
is a round trip to the exchange, and the exchange rejects every order of a triggered group. A
real fire decided in that window waits for the reset (:meth:`BookGuard.wait_group_open`, at most
``GROUP_OPEN_WAIT_S``) rather than be sent to a certain rejection.
"""

from __future__ import annotations

from typing import Final, Protocol

import structlog
import trio

from executor.config.settings import ExchangeSettings
from executor.decide.decision import KillSwitchState
from executor.exchange.book.cancels import MAX_BATCH_CANCEL, BookWriter, cancel_resting
from executor.exchange.book.order_group import OrderGroup
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.follow.reconcile_terms import OrderRowSink
from executor.exchange.halts import ExchangeHalts
from executor.exchange.messages import BATCH_CANCEL_PATH
from executor.exchange.protocols import RESOLUTION_TIMEOUT_S
from executor.exchange.rest import READ_TIMEOUT_S
from executor.recording.audit_trail import AuditTransition
from executor.recording.orders.terms import GOOD_TILL_CANCELED
from executor.recording.rows import OrderRow

log = structlog.get_logger()

LOOK_INTERVAL_S: Final = 0.5
"""Seconds between looks at the switch and the audit trail: an engage reaches the exchange within
the switch's own cache time (1 s by default) plus this. Reading the switch costs microseconds."""

EXIT_CANCEL_TIMEOUT_S: Final = READ_TIMEOUT_S + RESOLUTION_TIMEOUT_S
"""Longest the shutdown's cancels may take (seconds, shielded): one batch cancel at its whole
request budget, then its rows. A batch starts only while a request's whole budget is left
(``READ_TIMEOUT_S``), so the deadline never cuts a cancel mid-request; orders beyond what fits
stay on the book for the next start. Adds to the stop time with ``--cancel-resting-on-exit``."""

GROUP_OPEN_WAIT_S: Final = 2 * LOOK_INTERVAL_S
"""Longest a real fire waits for the group's reset once no halt holds (seconds): the look that
hears of the halt's end, and one more should the exchange refuse the first reset."""

AUDIT_UNAVAILABLE: Final = "audit trail unavailable"


class AuditState(Protocol):
    """Whether order rows can be written (``executor.telemetry.Telemetry``)."""

    @property
    def audit_available(self) -> bool: ...


class BookGuard:
    """Keeps the exchange's side of a halt in step with this executor's.

    Args:
        writer: signed writes and reads (the transport).
        reconciler: follows the resting orders (whose rows a cancel ends).
        sink: where the cancelled rows go (the order ledger's keeper, as the cancels' source:
            it stops following an order its cancel ended and tells the risk gate of its fill).
        group: the order group, or None when there is none.
        kill_switch: the switch, or None.
        audit: the audit trail's state, or None (never unavailable).
        cancel_on_engage: cancel resting orders when the switch engages.
        trigger_on_engage: trigger the group when the switch engages.
        halts: the exchange's halts; during an exchange pause (no cancel goes through) the
            cancels wait for it to end rather than be spent; None: never paused.

    Attributes:
        cancels_sent / cancels_failed: orders named in batch cancels, and those not cancelled.
        looks: looks finished so far.
    """

    def __init__(
        self,
        writer: BookWriter,
        reconciler: Reconciler,
        sink: OrderRowSink,
        *,
        group: OrderGroup | None,
        kill_switch: KillSwitchState | None,
        audit: AuditState | None,
        cancel_on_engage: bool,
        trigger_on_engage: bool,
        halts: ExchangeHalts | None = None,
    ) -> None:
        self._writer = writer
        self._halts = halts
        self._reconciler = reconciler
        self._sink = sink
        self.group = group
        self._kill_switch = kill_switch
        self._audit = audit
        self.cancel_on_engage = cancel_on_engage
        self.trigger_on_engage = trigger_on_engage
        self.cancels_sent = 0
        self.cancels_failed = 0
        self.looks = 0
        self._asked: set[str] = set()
        self._told: set[str] = set()  # rows without an exchange id, logged once per engagement
        self._reset_on_release = False
        self._wake = trio.Event()
        self._looked = trio.Event()

    @property
    def group_triggered(self) -> bool:
        """Whether the order group stands triggered (as this executor last set it)."""
        return self.group is not None and self.group.triggered

    def notify(self) -> None:
        """Look again now (a state the guard follows may have changed). Never checkpoints."""
        self._wake.set()

    async def wait_group_open(self, timeout_s: float = GROUP_OPEN_WAIT_S) -> bool:
        """Wait, at most ``timeout_s``, until the group is not triggered (asking for a look
        now); whether it is open. Returns at once when it already is.

        Only a look that finds no halt resets the group: a caller waits here only after its own
        decision found none (the switch released, the trail available).
        """
        with trio.move_on_after(timeout_s):
            while self.group_triggered:
                looked = self._looked
                self.notify()
                await looked.wait()
        return not self.group_triggered

    def hear_audit(self, transition: AuditTransition) -> None:
        """An audit-trail transition (``AuditTrailState.on_change``): look at once, so the group
        is triggered when the trail goes down and reset when it returns without waiting for the
        next ``LOOK_INTERVAL_S``. Never checkpoints."""
        self.notify()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Look now, report started, then look every ``LOOK_INTERVAL_S`` until cancelled."""
        await self._look_contained()
        task_status.started()
        while True:
            with trio.move_on_after(LOOK_INTERVAL_S):
                await self._wake.wait()
            self._wake = trio.Event()
            await self._look_contained()

    async def _look_contained(self) -> None:
        # A bug in one look must not end the order path: logged, and the next look tries again.
        try:
            await self.look()
        except Exception:
            log.exception("book guard look failed")
        finally:
            self._looked.set()  # whoever waits for a look (wait_group_open) sees its result
            self._looked = trio.Event()

    async def look(self) -> None:
        """One look: cancel what must be cancelled, then trigger or reset the group as needed.

        Cancellation: a request cut short may have reached the exchange; the next look asks
        again what the state still needs.
        """
        reason = None if self._kill_switch is None else self._kill_switch.engaged_reason()
        if reason is None:
            self._asked.clear()
            self._told.clear()
        if self._halts is not None and not self._halts.exchange_active:
            self.looks += 1  # nothing goes through in an exchange pause: the look after it acts
            return
        if reason is not None and self.cancel_on_engage:  # a trading pause allows cancels
            await self._cancel_new_resting(f"kill switch engaged: {reason}")
        audit_down = self._audit is not None and not self._audit.audit_available
        halt = AUDIT_UNAVAILABLE if audit_down else None
        if reason is not None and self.trigger_on_engage:
            halt = f"kill switch engaged: {reason}"
        group = self.group
        tripped = group is not None and group.halts is not None and group.halts.group_tripped
        if reason is not None and tripped:
            # An engage while the exchange holds the group triggered: its release resets it,
            # whatever the engage itself asks of the group (the operator's way to resume).
            self._reset_on_release = True
        if group is not None and halt is not None and not group.triggered:
            await group.trigger(halt)
        elif group is not None and halt is None and (group.triggered or self._reset_on_release):
            reset = await group.reset("kill switch released and audit trail available")
            self._reset_on_release = self._reset_on_release and not reset
        self.looks += 1

    async def cancel_at_exit(self) -> None:
        """Cancel every resting order followed (``--cancel-resting-on-exit``), bounded.

        Cancellation: shielded for at most ``EXIT_CANCEL_TIMEOUT_S`` (the shutdown that calls it is
        itself a cancellation, or a sibling task's failure); a batch starts only while its whole
        request budget is left, and what is not done stays on the book for the next start.
        """
        rows = list(self._reconciler.followed.values())
        size = self._writer.limits.items_per_batch("DELETE", BATCH_CANCEL_PATH, MAX_BATCH_CANCEL)
        with trio.move_on_after(EXIT_CANCEL_TIMEOUT_S, shield=True) as budget:
            for start in range(0, len(rows), size):
                if budget.deadline - trio.current_time() < READ_TIMEOUT_S:
                    log.warning(
                        "exit cancels out of time: the rest stay on the book for the next start",
                        left=len(rows) - start,
                    )
                    return
                await self._cancel(rows[start : start + size], "executor shutdown")

    async def _cancel_new_resting(self, reason: str) -> None:
        """Cancel the followed orders not asked about in this engagement. A row without an
        exchange id (its order in flight, of unknown outcome) cannot be named: it is passed on,
        and so logged, once; it is cancelled at the look that finds it with an id."""
        followed = self._reconciler.followed.values()
        rows = [row for row in followed if row.client_order_id not in self._asked]
        rows = [row for row in rows if row.kalshi_order_id or row.client_order_id not in self._told]
        self._asked.update(row.client_order_id for row in rows if row.kalshi_order_id)
        self._told.update(row.client_order_id for row in rows if not row.kalshi_order_id)
        await self._cancel(rows, reason)

    async def _cancel(self, rows: list[OrderRow], reason: str) -> None:
        if not rows:
            return
        report = await cancel_resting(self._writer, rows, self._sink, reason=reason)
        self.cancels_sent += report.sent
        self.cancels_failed += report.failed


def book_guard(
    exchange: ExchangeSettings,
    writer: BookWriter,
    reconciler: Reconciler,
    sink: OrderRowSink,
    group: OrderGroup | None,
    kill_switch: KillSwitchState | None,
    audit: AuditState | None,
    halts: ExchangeHalts | None = None,
) -> BookGuard:
    """The guard for these settings (what an engage cancels and triggers: the module docstring)."""
    book, resting = exchange.book, exchange.time_in_force == GOOD_TILL_CANCELED
    cancel = book.cancel_resting_on_engage
    cancel_on_engage = resting if cancel is None else cancel
    return BookGuard(
        writer,
        reconciler,
        sink,
        group=group,
        kill_switch=kill_switch,
        audit=audit,
        cancel_on_engage=cancel_on_engage,
        trigger_on_engage=cancel_on_engage or not resting,
        halts=halts,
    )


__all__ = [
    "EXIT_CANCEL_TIMEOUT_S",
    "GROUP_OPEN_WAIT_S",
    "LOOK_INTERVAL_S",
    "AuditState",
    "BookGuard",
    "book_guard",
]
