"""Position sizing: how many contracts a fire asks for (DISPATCH.md §2).

Pure and synchronous: fractional Kelly on the market price, capped at a fraction of the balance,
floored at the fixed count, then capped by the resting volume at the level. A shadow fire always
asks for the fixed count; it measures the path, it never trades.
"""

from __future__ import annotations

import math

from executor.config.sizing import SizingConfig


def contract_count(
    config: SizingConfig,
    *,
    dry_run: bool,
    edge: float,
    kalshi_price: float,
    available_size_contracts: float,
    balance_dollars: float,
) -> int:
    """The contracts one fire asks for; 0 means the level has too little resting volume.

    Args:
        config: the sizing knobs.
        dry_run: a shadow fire, which always gets the fixed count.
        edge: the decision's estimated edge (probability units); negative counts as none.
        kalshi_price: the market price sizing uses (not the wire price), dollars per contract.
        available_size_contracts: resting volume at the level; ``0.0`` means unknown.
        balance_dollars: the account balance from the last poll; ``<= 0`` means unknown.

    Returns:
        The count, which may be below 1 only through the volume cap (the caller refuses it).
    """
    fixed = config.fixed_contract_count
    if dry_run:
        return fixed
    # A non-finite balance or price cannot size anything; fall back like an unknown balance.
    if not 0 < kalshi_price < 1 or not balance_dollars > 0 or not math.isfinite(balance_dollars):
        count = fixed
    else:
        full_kelly = max(0.0, edge) / (1 - kalshi_price)
        stake_fraction = min(
            full_kelly * max(0.0, config.kelly_fraction), config.max_position_pct_of_balance
        )
        count = max(int(stake_fraction * balance_dollars / kalshi_price), fixed)
    if available_size_contracts > 0 and math.isfinite(available_size_contracts):
        count = min(count, int(available_size_contracts))
    return count


__all__ = ["contract_count"]
