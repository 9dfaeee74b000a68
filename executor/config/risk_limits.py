"""The risk gate's limits: every DISPATCH.md §3 limit, its default and its environment variable.

Data only, read by ``executor.config.settings`` and handed to ``executor.decide.risk.RiskGate``; the
window lengths the rules count over are here too, so the warm start
(``executor.recording.orders.recent_orders``) reads the same 24 hours the gate forgets after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

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


__all__ = [
    "ALLOWED_EXCHANGE_INDEXES_ENV",
    "DAY_MS",
    "HOUR_MS",
    "RISK_ENV_VARS",
    "RISK_GATE_ENABLED_ENV",
    "RiskLimits",
]
