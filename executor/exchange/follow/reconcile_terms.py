"""The terms of reconciliation: where its rows and fills go, and what a lookup concluded.

Plain values and Protocols shared by :mod:`executor.exchange.follow.reconcile` (which re-exports
them) and its callers: the sinks (:class:`OrderRowSink`, :class:`CollectedRows`), who hears of fills
(:class:`FillRecorder`), the exchange's own reports (:class:`OrderFeed`: the stream), and the
outcomes (:class:`Verdict`: found, absent or unknown; :class:`Unresolved`, :class:`Resolution`,
:class:`StartupSummary`, and :class:`Answers`, what one call's tries learned).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from executor.exchange.follow.lookup import ExchangeOrder
from executor.recording.rows import OrderRow


class OrderRowSink(Protocol):
    """Where corrected rows go (``executor.telemetry.Telemetry.record_order`` fits)."""

    async def record_order(self, row: OrderRow, *, timeout_s: float = ...) -> None: ...


@runtime_checkable
class CancelNotes(Protocol):
    """An :class:`OrderRowSink` that is told, before a cancel is sent, why this executor cancels
    an order (the order ledger's: the row then says so whichever source reports the end first)."""

    def note_cancel(self, client_order_id: str, message: str) -> None: ...


@dataclass
class CollectedRows:
    """An :class:`OrderRowSink` that keeps the rows (start-up commits them in one go)."""

    rows: list[OrderRow] = dataclasses.field(default_factory=list)

    async def record_order(self, row: OrderRow, *, timeout_s: float = 0.0) -> None:
        """Keep ``row``. Cancellation: never checkpoints."""
        self.rows.append(row)


class FillRecorder(Protocol):
    """Who hears of a fill learned later (``executor.decide.risk.RiskGate.record_fill`` fits)."""

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None: ...


class OrderFeed(Protocol):
    """Orders the exchange reported by itself (``executor.exchange.stream.orders`` fits)."""

    def known(self, client_order_id: str) -> ExchangeOrder | None: ...

    async def wait(self, client_order_ids: Collection[str], seconds: float) -> None: ...


class Verdict(enum.Enum):
    """What the exchange said about one order."""

    FOUND = "found"
    ABSENT = "absent"
    """Not listed, and the exchange's data covers the send: it does not have the order."""
    UNKNOWN = "unknown"
    """Not found, and not known to be absent: the listing may not show the order yet, or the
    exchange could not be asked (``Resolution.error`` says why). The row stays open."""
    UNANSWERED = "unknown"
    """The name of :attr:`UNKNOWN` before lookups had three answers (an alias)."""


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An order to look up: its last row, and why its outcome is unknown (None: an order followed
    on the book, whose ``error_message`` is kept); ``tries`` replaces the call's when set."""

    row: OrderRow
    cause: str | None
    tries: int | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one lookup ended: the row as it now stands, the verdict, the exchange's order, and
    for an unknown verdict the error that kept the exchange from answering (None: not listed)."""

    row: OrderRow
    verdict: Verdict
    order: ExchangeOrder | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class StartupSummary:
    """The start-up pass in numbers (its one log line)."""

    filled: int = 0
    canceled: int = 0
    resting: int = 0
    absent: int = 0
    unknown: int = 0


@dataclass
class Answers:
    """What the tries of one ``Reconciler.reconcile`` call learned, by ``client_order_id``."""

    found: dict[str, ExchangeOrder] = dataclasses.field(default_factory=dict)
    absent: set[str] = dataclasses.field(default_factory=set)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)


def sent_ms(row: OrderRow) -> int:
    """When ``row``'s order was sent (wall ms): its ``submitted_at_ms``, else its request time."""
    return row.submitted_at_ms if row.submitted_at_ms is not None else row.requested_at_ms


__all__ = [
    "Answers",
    "CancelNotes",
    "CollectedRows",
    "FillRecorder",
    "OrderFeed",
    "OrderRowSink",
    "Resolution",
    "StartupSummary",
    "Unresolved",
    "Verdict",
    "sent_ms",
]
