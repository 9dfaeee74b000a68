"""Where the rows and fills learned from the exchange go: small protocols, and a collecting sink.

Reconciliation (``executor.exchange.reconcile``) and cancels (``executor.exchange.cancels``) learn
an order's end from the exchange and hand the corrected row to an :class:`OrderRowSink` (the
running executor's telemetry; at start-up, or from ``executor killswitch`` run alone, a
:class:`CollectedRows` committed in one go) and a later fill to a :class:`FillRecorder` (the risk
gate). Here so neither module holds the other's seams.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

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


__all__ = ["CollectedRows", "FillRecorder", "OrderRowSink"]
