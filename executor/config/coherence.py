"""Whether the sizing knobs and the risk gate's limits agree: said once at start-up, not learned
one refused order at a time.

The reference's defaults disagree above a small balance: sizing stakes up to
``KALSHI_MAX_POSITION_PCT_OF_BALANCE`` (2%) of the balance on one order, while the risk gate lets a
ticker hold ``KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER`` (5) contracts. With $1,000 a wake at
0.50 sizes to up to 40 contracts and the gate refuses it (``position on ... would reach 40
contracts (max 5)``), and so on for every wake. Both rules are the reference's (DISPATCH.md §2,
§3) and stay as they are; :func:`sizing_conflict` finds the disagreement from the settings and the
first balance polled, and says which variable to set, for the caller to log as one warning.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from executor.config.risk_limits import RISK_ENV_VARS, RiskLimits
from executor.config.sizing import (
    FIXED_CONTRACT_COUNT_ENV,
    KELLY_FRACTION_ENV,
    MAX_POSITION_PCT_OF_BALANCE_ENV,
    SizingConfig,
)

REFERENCE_PRICE: Final = 0.50
"""The price (dollars) the check sizes a wake at: mid-book. Cheaper contracts size larger, so
below it a wake may still be refused; a guess at a typical wake, said in the warning."""

_TICKER_LIMIT_ENV: Final = RISK_ENV_VARS["max_position_contracts_per_ticker"]


def sizing_conflict(
    sizing: SizingConfig, limits: RiskLimits, balance_dollars: float, *, risk_enabled: bool
) -> str | None:
    """Why the risk gate will refuse typical real orders as sized, with the fix; None when it
    will not (or the gate is off). ``balance_dollars`` <= 0 means not known (not checked)."""
    if not risk_enabled:
        return None
    limit = limits.max_position_contracts_per_ticker
    fixed = sizing.fixed_contract_count
    if fixed > limit:
        return (
            f"{FIXED_CONTRACT_COUNT_ENV}={fixed} is above {_TICKER_LIMIT_ENV}={limit:g}: the risk "
            "gate will refuse every real order; lower the one or raise the other"
        )
    if sizing.kelly_fraction <= 0 or balance_dollars <= 0:
        return None  # a zero fraction sizes every order at the fixed count
    stake = sizing.max_position_pct_of_balance * balance_dollars
    largest = max(int(stake / REFERENCE_PRICE), fixed)
    if largest <= limit:
        return None
    fitting_pct = limit * REFERENCE_PRICE / balance_dollars
    return (
        f"sizing can ask for up to {largest} contracts at {REFERENCE_PRICE:.2f} "
        f"({MAX_POSITION_PCT_OF_BALANCE_ENV}={sizing.max_position_pct_of_balance:g} of the "
        f"${balance_dollars:,.2f} balance), past {_TICKER_LIMIT_ENV}={limit:g}: the risk gate "
        f"will refuse such wakes; set {KELLY_FRACTION_ENV}=0 (every order "
        f"{FIXED_CONTRACT_COUNT_ENV}={fixed} contracts), or {MAX_POSITION_PCT_OF_BALANCE_ENV} "
        f"to {_round_down(fitting_pct):g} or less, or raise the limit"
    )


def limits_summary(limits: RiskLimits) -> str:
    """The risk gate's limits in words, for the start-up line: what will refuse later wakes
    (a second one on a market within the cooldown, the eleventh in an hour) is known before the
    first."""
    return (
        f"{limits.max_attempts_per_hour} attempts an hour, {limits.max_attempts_per_day} a day, "
        f"{limits.max_attempts_per_ticker_per_day} a ticker a day; one per market and side "
        f"every {limits.refire_cooldown_s:g} s; {limits.max_concurrent_dispatches} in flight; "
        f"${limits.max_notional_per_day_dollars:,.2f} notional a day; positions of "
        f"{limits.max_position_contracts_per_ticker:g} contracts a ticker, "
        f"{limits.max_position_contracts_per_event:g} an event, "
        f"{limits.max_position_contracts_per_correlation_group:g} a correlation group"
    )


def _round_down(fraction: float) -> float:
    """``fraction`` cut to four decimals, never rounded up past what fits."""
    return int(fraction * 10_000) / 10_000


__all__ = ["REFERENCE_PRICE", "limits_summary", "sizing_conflict"]
