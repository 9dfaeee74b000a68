"""Risk-gate windows that only a partial expiry shows: the daily notional and the cooldown.

Each test here was written after the behaviour was broken on purpose and the whole suite still
passed: the notional of an attempt that left the 24 h window while others stayed, and a cooldown
taken from the oldest attempt on a (ticker, side) instead of the newest.
"""

from __future__ import annotations

import dataclasses

from executor.config.risk_limits import DAY_MS, HOUR_MS, RiskLimits
from executor.decide.risk import RiskGate

T0 = 1_700_000_000_000
"""A wall-clock start (ms)."""
SECOND_MS = 1_000


def gate_with(**limits: float) -> RiskGate:
    """A gate over the default limits with ``limits`` changed, allowing exchange 0."""
    return RiskGate(dataclasses.replace(RiskLimits(), **limits), frozenset({0}))


def check(gate: RiskGate, ticker: str, count: int, price: float, now_ms: int) -> str | None:
    return gate.check(ticker, "yes", 0, count, price, now_ms, "")


def test_an_attempt_leaving_the_day_takes_its_notional_with_it() -> None:
    """With a $10 day, $8 at T0 and $1 an hour later, a $2 order fits once the $8 attempt is
    older than 24 h (only $1 is left), and did not fit before it left."""
    gate = gate_with(max_notional_per_day_dollars=10.0, max_attempts_per_hour=100)
    gate.record_attempt("KXA-X", "yes", 16, 0.50, T0, "")  # $8.00
    gate.record_attempt("KXB-X", "yes", 2, 0.50, T0 + HOUR_MS, "")  # $1.00
    assert check(gate, "KXC-X", 4, 0.50, T0 + DAY_MS - 1) == (
        "daily notional would reach $11.00 (max $10.00)"
    )
    assert check(gate, "KXC-X", 4, 0.50, T0 + DAY_MS) is None


def test_the_remaining_attempts_notional_still_counts_after_one_leaves() -> None:
    """The negative twin: after the first attempt leaves, the second's $1 still adds up ($1 + $9.50
    is over $10)."""
    gate = gate_with(max_notional_per_day_dollars=10.0, max_attempts_per_hour=100)
    gate.record_attempt("KXA-X", "yes", 16, 0.50, T0, "")
    gate.record_attempt("KXB-X", "yes", 2, 0.50, T0 + HOUR_MS, "")
    assert check(gate, "KXC-X", 19, 0.50, T0 + DAY_MS) == (
        "daily notional would reach $10.50 (max $10.00)"
    )


def test_the_cooldown_runs_from_the_newest_attempt_on_the_ticker_and_side() -> None:
    """Attempts at 0 s and 61 s with a 60 s cooldown: one at 62 s is refused (1.0 s after the
    newest), though the oldest is 62 s old."""
    gate = gate_with(refire_cooldown_s=60.0)
    gate.record_attempt("KXA-X", "yes", 1, 0.40, T0, "")
    assert check(gate, "KXA-X", 1, 0.40, T0 + 61 * SECOND_MS) is None
    gate.record_attempt("KXA-X", "yes", 1, 0.40, T0 + 61 * SECOND_MS, "")
    assert check(gate, "KXA-X", 1, 0.40, T0 + 62 * SECOND_MS) == (
        "cooldown: last yes attempt on KXA-X was 1.0s ago (min 60s)"
    )


def test_an_older_attempt_replayed_late_does_not_shorten_the_cooldown() -> None:
    """A warm start may record attempts out of order: an older one recorded after a newer one
    leaves the cooldown running from the newer."""
    gate = gate_with(refire_cooldown_s=60.0)
    gate.record_attempt("KXA-X", "yes", 1, 0.40, T0 + 61 * SECOND_MS, "")
    gate.record_attempt("KXA-X", "yes", 1, 0.40, T0, "")
    assert check(gate, "KXA-X", 1, 0.40, T0 + 62 * SECOND_MS) is not None
    assert check(gate, "KXA-X", 1, 0.40, T0 + 121 * SECOND_MS) is None
