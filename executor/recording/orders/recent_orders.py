"""The risk gate's warm start: the last 24 h of ``orders_fired``, read once at start-up (§3).

:func:`load_recent_orders` is the gate's one database read, kept out of the pure decision layer,
and blocking: the caller runs it in a worker thread before the socket is bound, and hands the result
to ``RiskGate.warm_start``. Nothing at fire time reads the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from executor.config.risk_limits import DAY_MS
from executor.recording.database import read_orders_fired


@dataclass(frozen=True, slots=True)
class PastOrder:
    """One ``orders_fired`` row as the warm start needs it (``correlation_group`` "" for NULL)."""

    ticker: str
    correlation_group: str
    outcome_side: str
    count: float
    price: float
    fill_count: float
    requested_at_ms: int


_RECENT_ORDERS_SQL: Final = (
    "SELECT ticker, COALESCE(correlation_group, ''), outcome_side, CAST(count AS REAL),"
    " CAST(price_dollars AS REAL), COALESCE(CAST(fill_count AS REAL), 0.0), requested_at_ms"
    " FROM orders_fired WHERE status != 'rejected' AND requested_at_ms > ?"
    " ORDER BY requested_at_ms, id"
)


def load_recent_orders(db_path: Path, now_ms: int) -> list[PastOrder]:
    """Read the last 24 h of non-rejected ``orders_fired`` rows, oldest first (blocking).

    The file is opened read-only; a missing file or a file without the table gives ``[]``.

    Raises:
        sqlite3.Error: the file exists but cannot be read (corrupt, locked past the timeout).
    """
    rows = read_orders_fired(db_path, _RECENT_ORDERS_SQL, (now_ms - DAY_MS,))
    return [
        PastOrder(
            ticker=str(ticker),
            correlation_group=str(group),
            outcome_side=str(side),
            count=float(count),
            price=float(price),
            fill_count=float(fill_count),
            requested_at_ms=int(requested_at_ms),
        )
        for ticker, group, side, count, price, fill_count, requested_at_ms in rows
    ]


__all__ = ["PastOrder", "load_recent_orders"]
