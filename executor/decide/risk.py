"""The risk gate: the last refusal before a real order is sent (DISPATCH.md §3).

All state is in memory and kept current as attempts, fills and reconciliations are recorded, so
:meth:`RiskGate.check` is arithmetic on a few counters: time-ordered deques hold the 24-hour (and
one-hour) windows, and running tallies per ticker, event and correlation group move as entries
enter and leave them. Nothing at fire time reads the database; :func:`load_recent_orders` reads the
audit table once at start-up (blocking: the caller runs it in a worker thread) and
:meth:`RiskGate.warm_start` replays it.

Times are wall-clock milliseconds supplied by the caller. Entries are expected in time order; one
recorded out of order (the wall clock stepped back) stays in its window a little longer or shorter
than it should, never forever.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final, NamedTuple

DAY_MS: Final = 24 * 60 * 60 * 1000
"""The long window (ms): attempts, notional and fills older than this no longer count."""

HOUR_MS: Final = 60 * 60 * 1000
"""The short window (ms) of the attempts-per-hour limit."""

ALLOWED_EXCHANGE_INDEXES_ENV: Final = "KALSHI_ALLOWED_EXCHANGE_INDEXES"
RISK_GATE_ENABLED_ENV: Final = "KALSHI_RISK_GATE_ENABLED"


@dataclass(frozen=True, slots=True)
class RiskLimits:
    """Every §3 limit with the reference's default; ``RISK_ENV_VARS`` names each one's variable.

    Attributes:
        max_attempts_per_hour: attempts in the last hour (rule 5).
        max_attempts_per_day: attempts in the last 24 h (rule 6).
        max_attempts_per_ticker_per_day: attempts on one ticker in 24 h (rule 7).
        max_attempts_per_event_per_day: attempts across one event in 24 h (rule 8).
        max_attempts_per_correlation_group_per_day: attempts across one group in 24 h (rule 9).
        max_notional_per_day_dollars: sum of count x price over 24 h, this order included (rule 10).
        max_concurrent_dispatches: dispatches in flight at once (rule 2).
        max_position_contracts_per_ticker: open contracts on one ticker after this order (rule 11).
        max_position_contracts_per_event: open contracts across one event (rule 12).
        max_position_contracts_per_correlation_group: open contracts across one group (rule 13).
        refire_cooldown_s: least time between attempts on one (ticker, direction) (rule 3).
    """

    max_attempts_per_hour: int = 10
    max_attempts_per_day: int = 50
    max_attempts_per_ticker_per_day: int = 5
    max_attempts_per_event_per_day: int = 6
    max_attempts_per_correlation_group_per_day: int = 10
    max_notional_per_day_dollars: float = 50.0
    max_concurrent_dispatches: int = 2
    max_position_contracts_per_ticker: float = 5.0
    max_position_contracts_per_event: float = 6.0
    max_position_contracts_per_correlation_group: float = 10.0
    refire_cooldown_s: float = 60.0


RISK_ENV_VARS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "max_attempts_per_hour": "KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR",
        "max_attempts_per_day": "KALSHI_RISK_MAX_ATTEMPTS_PER_DAY",
        "max_attempts_per_ticker_per_day": "KALSHI_RISK_MAX_ATTEMPTS_PER_TICKER_PER_DAY",
        "max_attempts_per_event_per_day": "KALSHI_RISK_MAX_ATTEMPTS_PER_EVENT_PER_DAY",
        "max_attempts_per_correlation_group_per_day": (
            "KALSHI_RISK_MAX_ATTEMPTS_PER_CORRELATION_GROUP_PER_DAY"
        ),
        "max_notional_per_day_dollars": "KALSHI_RISK_MAX_NOTIONAL_PER_DAY_DOLLARS",
        "max_concurrent_dispatches": "KALSHI_RISK_MAX_CONCURRENT_DISPATCHES",
        "max_position_contracts_per_ticker": "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER",
        "max_position_contracts_per_event": "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_EVENT",
        "max_position_contracts_per_correlation_group": (
            "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_CORRELATION_GROUP"
        ),
        "refire_cooldown_s": "KALSHI_RISK_REFIRE_COOLDOWN_SECONDS",
    }
)
""":class:`RiskLimits` field -> the environment variable that sets it (DISPATCH.md §3)."""


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


def event_of(ticker: str) -> str:
    """A ticker's event: the ticker without its last ``-suffix`` (no hyphen: itself)."""
    head, hyphen, _ = ticker.rpartition("-")
    return head if hyphen else ticker


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
    if not db_path.exists():
        return []
    uri = f"{db_path.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        (has_table,) = connection.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'orders_fired'"
        ).fetchone()
        if not has_table:
            return []
        rows = connection.execute(_RECENT_ORDERS_SQL, (now_ms - DAY_MS,)).fetchall()
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


class _Attempt(NamedTuple):
    at_ms: int
    ticker: str
    direction: str
    event: str
    group: str
    notional: float


class _Fill(NamedTuple):
    at_ms: int
    ticker: str
    event: str
    group: str
    contracts: float


class _Tally:
    """Per-key running totals and entry counts; a key leaves when its last entry does."""

    __slots__ = ("_counts", "_totals")

    def __init__(self) -> None:
        self._totals: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def add(self, key: str, amount: float = 1.0) -> None:
        self._totals[key] = self._totals.get(key, 0.0) + amount
        self._counts[key] = self._counts.get(key, 0) + 1

    def remove(self, key: str, amount: float = 1.0) -> None:
        remaining = self._counts.get(key, 0) - 1
        if remaining <= 0:
            # Dropping the key (not subtracting) keeps float residue from outliving its entries.
            self._counts.pop(key, None)
            self._totals.pop(key, None)
        else:
            self._counts[key] = remaining
            self._totals[key] -= amount

    def count(self, key: str) -> int:
        return self._counts.get(key, 0)

    def total(self, key: str) -> float:
        return self._totals.get(key, 0.0)


class RiskGate:
    """The §3 rules over in-memory attempt and fill history; synchronous, no I/O.

    ``direction`` is the wake's outcome side (``"yes"`` / ``"no"``), so cooldowns replayed from
    the audit table's ``outcome_side`` match live ones.
    """

    def __init__(self, limits: RiskLimits, allowed_exchange_indexes: frozenset[int]) -> None:
        self._limits = limits
        self._allowed = allowed_exchange_indexes
        self._allowed_text = str(sorted(allowed_exchange_indexes))
        self._cooldown_ms = limits.refire_cooldown_s * 1000
        self._in_flight = 0
        self._day: deque[_Attempt] = deque()
        self._hour: deque[int] = deque()
        self._attempts_by_ticker = _Tally()
        self._attempts_by_event = _Tally()
        self._attempts_by_group = _Tally()
        self._notional = 0.0
        self._last_attempt_ms: dict[tuple[str, str], int] = {}
        self._fills: deque[_Fill] = deque()
        self._fills_by_ticker = _Tally()
        self._fills_by_event = _Tally()
        self._fills_by_group = _Tally()
        self._reconciled: dict[str, float] = {}
        self._reconciled_by_event: dict[str, float] = {}
        self._reconciled_at_ms: int | None = None
        self._group_tickers: dict[str, set[str]] = {}

    @property
    def in_flight(self) -> int:
        """Dispatches started and not yet finished."""
        return self._in_flight

    def dispatch_started(self) -> None:
        """One more dispatch in flight (rule 2)."""
        self._in_flight += 1

    def dispatch_finished(self) -> None:
        """One dispatch fewer in flight."""
        self._in_flight = max(0, self._in_flight - 1)

    def warm_start(self, orders: Iterable[PastOrder]) -> None:
        """Replay past orders (oldest first) as attempts, and their fills as fills."""
        for order in sorted(orders, key=lambda past: past.requested_at_ms):
            self._add_attempt(
                order.ticker,
                order.outcome_side,
                order.count * order.price,
                order.requested_at_ms,
                order.correlation_group,
            )
            self.record_fill(
                order.ticker, order.fill_count, order.requested_at_ms, order.correlation_group
            )

    def check(
        self,
        ticker: str,
        direction: str,
        exchange_index: int,
        count: int,
        price: float,
        now_ms: int,
        correlation_group: str,
    ) -> str | None:
        """The first rule this order breaks, as its §3 text (without ``risk gate: ``), or None."""
        limits = self._limits
        if exchange_index not in self._allowed:
            reason = f"exchange_index={exchange_index} not in allowed {self._allowed_text}"
            if exchange_index == -1:
                reason += " (unknown shard cannot be verified as funded)"
            return reason
        if self._in_flight >= limits.max_concurrent_dispatches:
            return (
                f"{self._in_flight} dispatches already in flight"
                f" (max {limits.max_concurrent_dispatches})"
            )
        last_ms = self._last_attempt_ms.get((ticker, direction))
        if last_ms is not None and now_ms - last_ms < self._cooldown_ms:
            return (
                f"cooldown: last {direction} attempt on {ticker} was"
                f" {(now_ms - last_ms) / 1000:.1f}s ago (min {limits.refire_cooldown_s:.0f}s)"
            )
        self._prune(now_ms)
        if len(self._hour) >= limits.max_attempts_per_hour:
            return (
                f"{len(self._hour)} attempts in the last hour (max {limits.max_attempts_per_hour})"
            )
        if len(self._day) >= limits.max_attempts_per_day:
            return f"{len(self._day)} attempts in the last 24h (max {limits.max_attempts_per_day})"
        on_ticker = self._attempts_by_ticker.count(ticker)
        if on_ticker >= limits.max_attempts_per_ticker_per_day:
            return (
                f"{on_ticker} attempts on {ticker} in the last 24h"
                f" (max {limits.max_attempts_per_ticker_per_day})"
            )
        event = event_of(ticker)
        on_event = self._attempts_by_event.count(event)
        if on_event >= limits.max_attempts_per_event_per_day:
            return (
                f"{on_event} attempts across event {event!r} in the last 24h"
                f" (max {limits.max_attempts_per_event_per_day})"
            )
        if correlation_group:
            on_group = self._attempts_by_group.count(correlation_group)
            if on_group >= limits.max_attempts_per_correlation_group_per_day:
                return (
                    f"{on_group} attempts across correlation group {correlation_group!r} in the"
                    f" last 24h (max {limits.max_attempts_per_correlation_group_per_day})"
                )
        notional = self._notional + count * price
        if notional > limits.max_notional_per_day_dollars:
            return (
                f"daily notional would reach ${notional:.2f}"
                f" (max ${limits.max_notional_per_day_dollars:.2f})"
            )
        position = self._reconciled.get(ticker, 0.0) + self._fills_by_ticker.total(ticker) + count
        if position > limits.max_position_contracts_per_ticker:
            return (
                f"position on {ticker} would reach {position:g} contracts"
                f" (max {limits.max_position_contracts_per_ticker:g})"
            )
        position = (
            self._reconciled_by_event.get(event, 0.0) + self._fills_by_event.total(event) + count
        )
        if position > limits.max_position_contracts_per_event:
            return (
                f"position across event {event!r} would reach {position:g} contracts"
                f" (max {limits.max_position_contracts_per_event:g})"
            )
        if correlation_group:
            position = self._group_position(correlation_group) + count
            if position > limits.max_position_contracts_per_correlation_group:
                return (
                    f"position across correlation group {correlation_group!r} would reach"
                    f" {position:g} contracts"
                    f" (max {limits.max_position_contracts_per_correlation_group:g})"
                )
        return None

    def record_attempt(
        self,
        ticker: str,
        direction: str,
        count: int,
        price: float,
        now_ms: int,
        correlation_group: str,
    ) -> None:
        """Count an attempt (before its request is sent: a hung or failed order still counts)."""
        self._add_attempt(ticker, direction, count * price, now_ms, correlation_group)

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None:
        """Add a fill to the position history; a fill of 0 (a kill) or less changes nothing."""
        if not fill_count > 0:
            return
        fill = _Fill(now_ms, ticker, event_of(ticker), correlation_group, fill_count)
        self._fills.append(fill)
        self._fills_by_ticker.add(fill.ticker, fill_count)
        self._fills_by_event.add(fill.event, fill_count)
        if correlation_group:
            self._fills_by_group.add(correlation_group, fill_count)
            self._group_tickers.setdefault(correlation_group, set()).add(ticker)

    def reconcile(self, positions: Mapping[str, float], as_of_ms: int) -> None:
        """Take the exchange's open positions as of ``as_of_ms`` (when the poll was issued).

        From now on a position is this reconciled figure plus the fills recorded after
        ``as_of_ms`` (and within 24 h).
        """
        self._reconciled = {ticker: float(held) for ticker, held in positions.items()}
        by_event: dict[str, float] = {}
        for ticker, held in self._reconciled.items():
            event = event_of(ticker)
            by_event[event] = by_event.get(event, 0.0) + held
        self._reconciled_by_event = by_event
        self._reconciled_at_ms = as_of_ms
        self._prune_fills(as_of_ms)

    # --- internals ---

    def _add_attempt(
        self, ticker: str, direction: str, notional: float, at_ms: int, group: str
    ) -> None:
        attempt = _Attempt(at_ms, ticker, direction, event_of(ticker), group, notional)
        self._day.append(attempt)
        self._hour.append(at_ms)
        self._attempts_by_ticker.add(ticker)
        self._attempts_by_event.add(attempt.event)
        if group:
            self._attempts_by_group.add(group)
            self._group_tickers.setdefault(group, set()).add(ticker)
        self._notional += notional
        key = (ticker, direction)
        self._last_attempt_ms[key] = max(at_ms, self._last_attempt_ms.get(key, at_ms))

    def _prune(self, now_ms: int) -> None:
        """Rule 4: forget attempts and fills older than 24 h (and the hour's older than 1 h)."""
        day_start = now_ms - DAY_MS
        hour = self._hour
        while hour and hour[0] <= now_ms - HOUR_MS:
            hour.popleft()
        day = self._day
        while day and day[0].at_ms <= day_start:
            attempt = day.popleft()
            self._attempts_by_ticker.remove(attempt.ticker)
            self._attempts_by_event.remove(attempt.event)
            if attempt.group:
                self._attempts_by_group.remove(attempt.group)
            self._notional -= attempt.notional
            key = (attempt.ticker, attempt.direction)
            last_ms = self._last_attempt_ms.get(key)
            # A cooldown entry may go once its own attempt has left the window and expired.
            if (
                last_ms is not None
                and last_ms <= attempt.at_ms
                and now_ms - last_ms >= self._cooldown_ms
            ):
                del self._last_attempt_ms[key]
        if not day:
            self._notional = 0.0  # no float residue once nothing is left to sum
        self._prune_fills(day_start)

    def _prune_fills(self, cutoff_ms: int) -> None:
        """Forget fills at or before ``cutoff_ms`` (and at or before the last reconciliation)."""
        if self._reconciled_at_ms is not None:
            cutoff_ms = max(cutoff_ms, self._reconciled_at_ms)
        fills = self._fills
        while fills and fills[0].at_ms <= cutoff_ms:
            fill = fills.popleft()
            self._fills_by_ticker.remove(fill.ticker, fill.contracts)
            self._fills_by_event.remove(fill.event, fill.contracts)
            if fill.group:
                self._fills_by_group.remove(fill.group, fill.contracts)

    def _group_position(self, group: str) -> float:
        """Reconciled contracts on the group's known tickers plus the group's fills since."""
        reconciled = self._reconciled
        held = sum(reconciled.get(ticker, 0.0) for ticker in self._group_tickers.get(group, ()))
        return held + self._fills_by_group.total(group)


__all__ = [
    "ALLOWED_EXCHANGE_INDEXES_ENV",
    "DAY_MS",
    "HOUR_MS",
    "RISK_ENV_VARS",
    "RISK_GATE_ENABLED_ENV",
    "PastOrder",
    "RiskGate",
    "RiskLimits",
    "event_of",
    "load_recent_orders",
]
