"""Sizing: DISPATCH.md §2's fractional Kelly, its floors and caps, and the shadow fixed count."""

from __future__ import annotations

import pytest

from executor.config.sizing import SizingConfig
from executor.decide.sizing import contract_count

DEFAULTS = SizingConfig()


def _real(
    config: SizingConfig = DEFAULTS,
    *,
    edge: float = 0.05,
    price: float = 0.42,
    available: float = 0.0,
    balance: float = 1000.0,
) -> int:
    return contract_count(
        config,
        dry_run=False,
        edge=edge,
        kalshi_price=price,
        available_size_contracts=available,
        balance_dollars=balance,
    )


def test_the_first_spec_example_sizes_thirty() -> None:
    """Edge 0.05 at 0.42 with $1000 and default knobs gives 30 contracts."""
    assert _real(edge=0.05, price=0.42, balance=1000.0) == 30


def test_the_balance_cap_binds_in_the_second_spec_example() -> None:
    """Edge 0.9 at 0.1 with full Kelly is capped at 2 % of $1000: 200 contracts."""
    config = SizingConfig(kelly_fraction=1.0, max_position_pct_of_balance=0.02)
    assert _real(config, edge=0.9, price=0.1, balance=1000.0) == 200


@pytest.mark.parametrize("balance", [0.0, -5.0, float("nan")])
def test_an_unknown_balance_gives_the_fixed_count(balance: float) -> None:
    """No known balance (0, negative, NaN) sizes at the fixed count."""
    config = SizingConfig(fixed_contract_count=3)
    assert _real(config, balance=balance) == 3


@pytest.mark.parametrize("price", [0.0, 1.0, -0.1, 1.5])
def test_a_price_outside_zero_one_gives_the_fixed_count(price: float) -> None:
    """A price not strictly inside (0, 1) sizes at the fixed count."""
    config = SizingConfig(fixed_contract_count=2)
    assert _real(config, price=price) == 2


def test_a_negative_edge_floors_at_the_fixed_count() -> None:
    """A negative edge stakes nothing, so the floor (the fixed count) wins."""
    config = SizingConfig(fixed_contract_count=4)
    assert _real(config, edge=-0.3) == 4


def test_a_small_edge_is_floored_at_the_fixed_count() -> None:
    """A Kelly size below the fixed count is raised to it (the twin of the 30-contract case)."""
    config = SizingConfig(fixed_contract_count=5)
    assert _real(config, edge=0.001) == 5


def test_available_size_caps_the_count() -> None:
    """Resting volume below the Kelly size caps it, truncating fractional volume."""
    assert _real(available=7.9) == 7


def test_available_size_above_the_count_changes_nothing() -> None:
    """Resting volume above the Kelly size leaves it alone."""
    assert _real(available=1000.0) == 30


def test_zero_available_size_means_unknown() -> None:
    """0.0 resting volume is unknown and does not cap."""
    assert _real(available=0.0) == 30


def test_available_size_below_one_gives_zero() -> None:
    """A cap below one contract returns 0: the caller's volume refusal."""
    assert _real(available=0.5) == 0


def test_a_shadow_fire_gets_the_fixed_count() -> None:
    """Shadow fires ignore edge, balance and volume: always the fixed count."""
    config = SizingConfig(fixed_contract_count=3)
    count = contract_count(
        config,
        dry_run=True,
        edge=0.9,
        kalshi_price=0.1,
        available_size_contracts=0.5,
        balance_dollars=1_000_000.0,
    )
    assert count == 3
