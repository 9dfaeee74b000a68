"""What reconciliation works with: the orders it asks about, its three answers, where rows go.

The vocabulary of ``executor.exchange.reconcile`` (which re-exports every name here): an order to
look up (:class:`Unresolved`), what the exchange said about it (:class:`Verdict`: found, absent
or unknown) and how its row now stands (:class:`Resolution`), the start-up pass in numbers
(:class:`StartupSummary`), and the two places learned things go, as protocols so this layer never
imports telemetry or the risk gate (:class:`OrderRowSink`, :class:`FillRecorder`). Plain data.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Protocol

from executor.exchange.order_lookup import ExchangeOrder
from executor.recording.rows import OrderRow


class OrderRowSink(Protocol):
    """Where corrected rows go (``executor.telemetry.Telemetry.record_order`` fits)."""

    async def record_order(self, row: OrderRow, *, timeout_s: float = ...) -> None: ...


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
    """What the tries of one :meth:`Reconciler.reconcile` call learned, by ``client_order_id``."""

    found: dict[str, ExchangeOrder] = dataclasses.field(default_factory=dict)
    absent: set[str] = dataclasses.field(default_factory=set)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)


def sent_ms(row: OrderRow) -> int:
    """When ``row``'s order was sent (wall ms): its ``submitted_at_ms``, else its request time."""
    return row.submitted_at_ms if row.submitted_at_ms is not None else row.requested_at_ms


__all__ = [
    "Answers",
    "CollectedRows",
    "FillRecorder",
    "OrderRowSink",
    "Resolution",
    "StartupSummary",
    "Unresolved",
    "Verdict",
    "sent_ms",
]
