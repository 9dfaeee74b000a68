"""The terms of reconciliation: where its rows and fills go, and what a lookup concluded.

Plain values and Protocols shared by :mod:`executor.exchange.reconcile` (which re-exports them)
and its callers: the sinks (:class:`OrderRowSink`, :class:`CollectedRows`), who hears of fills
(:class:`FillRecorder`), the exchange's own reports (:class:`OrderFeed`: the stream), and the
outcomes (:class:`Verdict`, :class:`Unresolved`, :class:`Resolution`, :class:`StartupSummary`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection
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


class OrderFeed(Protocol):
    """Orders the exchange reported by itself (``executor.exchange.stream_orders`` fits)."""

    def known(self, client_order_id: str) -> ExchangeOrder | None: ...

    async def wait(self, client_order_ids: Collection[str], seconds: float) -> None: ...


class Verdict(enum.Enum):
    """What the exchange said about one order."""

    FOUND = "found"
    ABSENT = "absent"
    """It answered, every try, without the order."""
    UNANSWERED = "unanswered"
    """The last try could not ask it (the error says why)."""


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An order to look up: its last row, and why its outcome is unknown (None: a resting order
    followed up, whose ``error_message`` is kept)."""

    row: OrderRow
    cause: str | None


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one lookup ended: the row as it now stands, the verdict, the exchange's order."""

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
    unanswered: int = 0


__all__ = [
    "CollectedRows",
    "FillRecorder",
    "OrderFeed",
    "OrderRowSink",
    "Resolution",
    "StartupSummary",
    "Unresolved",
    "Verdict",
]
