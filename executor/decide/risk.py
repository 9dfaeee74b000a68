"""The risk gate: the last refusal before a real order is sent (DISPATCH.md §3).

All state is in memory and kept current as attempts, fills and reconciliations are recorded, so
:meth:`RiskGate.check` is arithmetic on a few counters: time-ordered deques hold the 24-hour (and
one-hour) windows, and running tallies per ticker, event and correlation group move as entries
enter and leave them. Nothing at fire time reads the database: the warm start's read
(``executor.recording.orders.recent_orders``) runs once at start-up and :meth:`RiskGate.warm_start`
replays it. The limits and their environment variables are ``executor.config.risk_limits``
(re-exported here, with the warm start's ``PastOrder``, for the gate's callers).

Times are wall-clock milliseconds supplied by the caller. Entries are expected in time order; one
recorded out of order (the wall clock stepped back) stays in its window a little longer or shorter
than it should, never forever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from executor.config.risk_limits import (
    ALLOWED_EXCHANGE_INDEXES_ENV,
    DAY_MS,
    HOUR_MS,
    RISK_ENV_VARS,
    RISK_GATE_ENABLED_ENV,
    RiskLimits,
)
from executor.recording.orders.recent_orders import PastOrder


def event_of(ticker: str) -> str:
    """A ticker's event: the ticker without its last ``-suffix`` (no hyphen: itself)."""
    head, hyphen, _ = ticker.rpartition("-")
    return head if hyphen else ticker


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
        self._prune_group_tickers()

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

    def _prune_group_tickers(self) -> None:
        """Forget a group's ticker once nothing in the windows names it and no position is held
        on it (it adds nothing to the group's position then), so the map does not only grow."""
        live = {(attempt.group, attempt.ticker) for attempt in self._day if attempt.group}
        live.update((fill.group, fill.ticker) for fill in self._fills if fill.group)
        for group in list(self._group_tickers):
            tickers = {
                ticker
                for ticker in self._group_tickers[group]
                if (group, ticker) in live or self._reconciled.get(ticker, 0.0)
            }
            if tickers:
                self._group_tickers[group] = tickers
            else:
                del self._group_tickers[group]

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
]
