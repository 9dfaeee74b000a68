"""The sizing knobs as plain data: how many contracts a fire may ask for (DISPATCH.md §2).

``executor.decide.sizing`` computes the count from them; ``executor.config.settings`` reads them
from the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

FIXED_CONTRACT_COUNT_ENV: Final = "KALSHI_FIXED_ORDER_CONTRACT_COUNT"
KELLY_FRACTION_ENV: Final = "KALSHI_KELLY_FRACTION"
MAX_POSITION_PCT_OF_BALANCE_ENV: Final = "KALSHI_MAX_POSITION_PCT_OF_BALANCE"


@dataclass(frozen=True, slots=True)
class SizingConfig:
    """The sizing knobs (environment variable names in the ``*_ENV`` constants).

    Attributes:
        fixed_contract_count: contracts for shadow fires, unknown balances and odd prices, and the
            floor of every Kelly size (contracts).
        kelly_fraction: the share of the full Kelly stake to take (0.15 = 15 %).
        max_position_pct_of_balance: the most one order may stake, as a fraction of the balance
            (0.02 = 2 %).
    """

    fixed_contract_count: int = 1
    kelly_fraction: float = 0.15
    max_position_pct_of_balance: float = 0.02


__all__ = [
    "FIXED_CONTRACT_COUNT_ENV",
    "KELLY_FRACTION_ENV",
    "MAX_POSITION_PCT_OF_BALANCE_ENV",
    "SizingConfig",
]
