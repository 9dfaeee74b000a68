"""The audit trail's state: whether ``orders_fired`` can be written, its transitions, and the rows
it is owed.

One place decides when the trail is unavailable and when it is back (:meth:`AuditTrailState.
account`, from each batch's outcome), and tells whoever attached a listener
(:meth:`AuditTrailState.on_change`): the decision reads :attr:`AuditTrailState.available` through
``Telemetry.audit_available`` to refuse real fires while it is down, the order path runs an
adoption pass when it is back, and an exchange order group may be triggered on the same
transitions. Listeners run on the Trio thread, synchronously, in the consumer's task: they must
not block (start a task, set an event).

The rules (docs/operations/kill-switch-and-book.md, "No audit trail, no trading"): a batch in which
every order or heartbeat row was refused and none of either kind was written makes the trail
unavailable; the next batch that writes one makes it available again.

Rows the database refused **for a reason that may pass** (a full disk, a read-only or immutable
file, a lock held past the timeout) are *owed*, not dropped (issue 21, item 4): each is appended
to the intent journal (``executor.recording.orders.intent_journal``) so a kill cannot take it, held
here, and handed back to the writer at the front of the next batch (:meth:`take_owed`) until it is
written. A row refused for good (a CHECK or other constraint: a bug upstream; a value SQLite cannot
bind) is dropped, counted and logged with the row, as before. Owed rows keep their order: an owed
row that a later row of the same order has overtaken (committed in a batch already handed to the
writer) is no longer owed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog

from executor.recording.counting.counters import TelemetryCounters
from executor.recording.orders.intent_journal import IntentJournal, JournalWriteError
from executor.recording.rows import OrderRow, OrderStatus, row_fields

if TYPE_CHECKING:
    from executor.recording.sqlite_writer import BatchOutcome

log = structlog.get_logger()

_FOR_GOOD_MARKERS: Final = ("constraint failed", "DataError:", "ValueError:", "OverflowError:")
"""Words of a write error that will not pass by waiting: a constraint (CHECK, NOT NULL, UNIQUE,
FOREIGN KEY), a value too big for SQLite, or one sqlite3 cannot bind. Everything else (disk
full, read-only, I/O error, locked, the retry budget) is worth another try; an owed row rides at
the front of every batch, so a row misjudged here would turn every batch into row-by-row writes,
which is why the list errs towards "for good" for anything about the row itself."""


def refused_for_good(error: str) -> bool:
    """Whether a row's write error (``"{type}: {message}"``) means it can never be written."""
    return any(marker in error for marker in _FOR_GOOD_MARKERS)


def _supersedes(later: OrderRow, earlier: OrderRow) -> bool:
    """A row of an order replaces an earlier one unless it is a pending row after a resolution."""
    return later.status is not OrderStatus.PENDING or earlier.status is OrderStatus.PENDING


@dataclass(frozen=True, slots=True)
class AuditTransition:
    """The trail became unavailable (``available`` False, with the first error) or available."""

    available: bool
    error: str | None
    outages: int


Listener = Callable[[AuditTransition], None]
"""Told of every transition, on the Trio thread; must not block."""


class AuditTrailState:
    """Availability of the audit trail, its transitions, and the rows owed to it.

    Args:
        counters: the telemetry counters (``audit_available``, ``audit_outages``,
            ``order_rows_dropped``, ``order_rows_kept`` live there).
        path: the database, for log lines.
        journal: where owed rows are kept across a kill (None: in memory only).
    """

    def __init__(
        self, counters: TelemetryCounters, path: Path, journal: IntentJournal | None = None
    ) -> None:
        self._counters = counters
        self._path = str(path)
        self.journal = journal
        self._listeners: list[Listener] = []
        self._owed: dict[str, OrderRow] = {}
        self._journaled: dict[str, OrderRow] = {}
        """Owed rows already in the journal (a row refused again is not appended again)."""

    @property
    def available(self) -> bool:
        """False from a batch whose audit rows all failed until one is written again."""
        return self._counters.audit_available

    @property
    def owed(self) -> int:
        """Rows refused by the database and waiting to be written."""
        return len(self._owed)

    def on_change(self, listener: Listener) -> None:
        """Call ``listener`` at every transition from now on."""
        self._listeners.append(listener)

    def take_owed(self) -> list[OrderRow]:
        """The owed rows, oldest first, for the front of the next batch (owed again if refused
        again)."""
        rows = list(self._owed.values())
        self._owed.clear()
        return rows

    def account(self, outcome: BatchOutcome) -> list[tuple[OrderRow, str]]:
        """Take one batch's order-row outcome into account; return the rows dropped for good
        (the caller logs them).

        Cancellation: never checkpoints.
        """
        counters = self._counters
        committed = {row.client_order_id: row for row in outcome.order_rows_committed}
        for client_order_id in committed.keys() & self._owed.keys():
            del self._owed[client_order_id]  # overtaken by a later row of the same order
        for client_order_id in committed.keys() & self._journaled.keys():
            del self._journaled[client_order_id]
        if self.journal is not None and committed:
            self.journal.settle(committed.values())
        dropped: list[tuple[OrderRow, str]] = []
        for row, error in outcome.order_failures:
            later = committed.get(row.client_order_id)
            if refused_for_good(error):
                counters.order_rows_dropped += 1
                dropped.append((row, error))
            elif later is None or not _supersedes(later, row):
                self._owe(row, error)
        self._judge(outcome)
        return dropped

    def _owe(self, row: OrderRow, error: str) -> None:
        earlier = self._owed.get(row.client_order_id)
        if earlier is not None and not _supersedes(row, earlier):
            return
        self._owed[row.client_order_id] = row
        if self._journaled.get(row.client_order_id) == row:
            return  # refused again: already kept
        self._counters.order_rows_kept += 1
        if self.journal is None:
            return
        try:
            self.journal.append(row)
        except JournalWriteError as failure:
            log.error(
                "order row kept in memory only: the intent journal refused it too",
                path=self._path,
                row=row_fields(row),
                error=error,
                journal_error=str(failure),
            )
            return
        self._journaled[row.client_order_id] = row

    def _judge(self, outcome: BatchOutcome) -> None:
        counters = self._counters
        written = outcome.order_rows_written + outcome.heartbeat_rows_written
        failed = outcome.order_failures or outcome.heartbeat_failures
        transition: AuditTransition | None = None
        if written and not counters.audit_available:
            counters.audit_available = True
            log.warning(
                "audit trail available again: real fires are sent again",
                path=self._path,
                owed_rows=len(self._owed),
            )
            transition = AuditTransition(True, None, counters.audit_outages)
        elif failed and not written and counters.audit_available:
            counters.audit_available = False
            counters.audit_outages += 1
            first_error = (outcome.order_failures or outcome.heartbeat_failures)[0][1]
            log.error(
                "audit trail unavailable: real fires are refused until an order or heartbeat "
                "row is written again",
                path=self._path,
                error=first_error,
            )
            transition = AuditTransition(False, first_error, counters.audit_outages)
        if transition is not None:
            for listener in self._listeners:
                listener(transition)


__all__ = ["AuditTrailState", "AuditTransition", "Listener", "refused_for_good"]
