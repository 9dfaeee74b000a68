"""The sizing knobs against the risk gate's position limit: the disagreement is found at start-up,
with a fix that really fits."""

from __future__ import annotations

import dataclasses

import pytest

from executor.config.coherence import REFERENCE_PRICE, limits_summary, sizing_conflict
from executor.config.risk_limits import RiskLimits
from executor.config.sizing import SizingConfig
from executor.decide.sizing import contract_count

DEFAULTS = SizingConfig()
LIMITS = RiskLimits()


def _largest(config: SizingConfig, balance_dollars: float) -> int:
    """What sizing really asks for at the reference price with an edge large enough to reach
    the balance cap."""
    return contract_count(
        config,
        dry_run=False,
        edge=0.4,
        kalshi_price=REFERENCE_PRICE,
        available_size_contracts=0.0,
        balance_dollars=balance_dollars,
    )


def test_the_reference_defaults_disagree_on_a_funded_account() -> None:
    """Default sizing on $1,000 asks for 40 contracts at 0.50 against the limit of 5: one message
    with the count sizing really makes and the variables that fix it."""
    problem = sizing_conflict(DEFAULTS, LIMITS, 1000.0, risk_enabled=True)
    assert _largest(DEFAULTS, 1000.0) == 40
    assert problem == (
        "sizing can ask for up to 40 contracts at 0.50 (KALSHI_MAX_POSITION_PCT_OF_BALANCE=0.02 "
        "of the $1,000.00 balance), past KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER=5: the "
        "risk gate will refuse such wakes; set KALSHI_KELLY_FRACTION=0 (every order "
        "KALSHI_FIXED_ORDER_CONTRACT_COUNT=1 contracts), or KALSHI_MAX_POSITION_PCT_OF_BALANCE "
        "to 0.0025 or less, or raise the limit"
    )


@pytest.mark.parametrize("balance", [1000.0, 12_345.67, 250.0])
def test_the_suggested_fraction_fits(balance: float) -> None:
    """The fraction the message suggests sizes within the limit (checked with the real sizing),
    and the check then finds nothing."""
    problem = sizing_conflict(DEFAULTS, LIMITS, balance, risk_enabled=True)
    assert problem is not None
    suggested = float(problem.split("KALSHI_MAX_POSITION_PCT_OF_BALANCE to ")[1].split()[0])
    fitted = dataclasses.replace(DEFAULTS, max_position_pct_of_balance=suggested)
    assert _largest(fitted, balance) <= LIMITS.max_position_contracts_per_ticker
    assert sizing_conflict(fitted, LIMITS, balance, risk_enabled=True) is None


@pytest.mark.parametrize(
    ("config", "balance", "risk_enabled"),
    [
        (DEFAULTS, 100.0, True),  # the in-process fake's $100: 4 contracts at most
        (DEFAULTS, 0.0, True),  # no balance polled yet: sizing uses the fixed count
        (dataclasses.replace(DEFAULTS, kelly_fraction=0.0), 1_000_000.0, True),
        (DEFAULTS, 1_000_000.0, False),  # no risk gate, nothing to refuse
    ],
    ids=["small-balance", "unknown-balance", "kelly-zero", "gate-off"],
)
def test_no_warning_when_orders_fit(
    config: SizingConfig, balance: float, risk_enabled: bool
) -> None:
    """Nothing is said when a typical wake sizes within the limit (or nothing can refuse it)."""
    assert sizing_conflict(config, LIMITS, balance, risk_enabled=risk_enabled) is None
    if risk_enabled:
        assert _largest(config, balance) <= LIMITS.max_position_contracts_per_ticker


def test_a_fixed_count_above_the_limit_refuses_everything() -> None:
    """A fixed count above the per-ticker limit is said even before any balance is known."""
    config = dataclasses.replace(DEFAULTS, fixed_contract_count=6, kelly_fraction=0.0)
    assert sizing_conflict(config, LIMITS, 0.0, risk_enabled=True) == (
        "KALSHI_FIXED_ORDER_CONTRACT_COUNT=6 is above "
        "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER=5: the risk gate will refuse every real "
        "order; lower the one or raise the other"
    )


def test_the_limits_are_said_in_words() -> None:
    """The start-up line names every limit a later wake may meet, with the default values."""
    assert limits_summary(LIMITS) == (
        "10 attempts an hour, 50 a day, 5 a ticker a day; one per market and side every 60 s; "
        "2 in flight; $50.00 notional a day; positions of 5 contracts a ticker, 6 an event, "
        "10 a correlation group"
    )
    changed = dataclasses.replace(LIMITS, refire_cooldown_s=2.5, max_attempts_per_hour=7)
    assert "7 attempts an hour" in limits_summary(changed)
    assert "every 2.5 s" in limits_summary(changed)
