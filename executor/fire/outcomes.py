"""How fires end and how many ended each way: the fire path's outcome and counters (DISPATCH.md
§1 defines each counter; ``executor.fire.path`` counts them)."""

from __future__ import annotations

import enum
from typing import Final, Protocol

from executor.decide.decision import Refusal, RefusalKind
from executor.logs import RateLimitedWarning
from executor.recording.counting.counter_list import ORDER_PATH_OWNERS, SERVER_COUNTERS, Owner
from executor.recording.counting.counters import CounterValues
from executor.wire.protocol import WakeMessage


class FireOutcome(enum.Enum):
    """How one fire ended."""

    FIRED = "fired"
    REFUSED_PRICE = "refused_price"
    REFUSED_KILL_SWITCH = "refused_kill_switch"
    REFUSED_VOLUME = "refused_volume"
    REFUSED_RISK = "refused_risk"
    REFUSED_PERMISSION = "refused_permission"
    REFUSED_AUDIT = "refused_audit"
    REFUSED_ORDER_GROUP = "refused_order_group"
    REFUSED_PAUSED = "refused_paused"
    DISPATCH_ERROR = "dispatch_error"
    SHADOW_SKIPPED = "shadow_skipped"


FIRE_COUNTERS: Final = tuple(
    spec for spec in SERVER_COUNTERS if spec.owner is Owner.FIRE or spec.owner in ORDER_PATH_OWNERS
)
"""What :meth:`FirePath.counters` reports: the fire path's own counters (``Owner.FIRE``) and the
order path's, which the composition root gathers and the fire path carries."""


class FireCounters(CounterValues):
    """A snapshot of :data:`FIRE_COUNTERS` (DISPATCH.md §1 defines the fire path's own)."""

    __slots__ = ()
    counters = FIRE_COUNTERS


class OrderGroupGate(Protocol):
    """What the fire path asks of the order group (``executor.exchange.book.guard.BookGuard``)."""

    @property
    def group_triggered(self) -> bool: ...

    async def wait_group_open(self) -> bool:
        """Wait (bounded) until the order group is reset; whether it is open."""
        ...


# Per-fire refusals are rate-limited per kind: a hostile or broken poller must not flood the log.
_refusal_warnings: Final = {kind: RateLimitedWarning(f"fire_{kind.value}") for kind in RefusalKind}


_LOGGED_ELSEWHERE: Final = frozenset(
    {RefusalKind.AUDIT, RefusalKind.ORDER_GROUP, RefusalKind.PAUSED}
)
"""Refusals logged once for all rather than per fire: the audit trail's (at ERROR, each with its
row, by the fire path), and the exchange's halts (one WARNING when each starts:
``executor.exchange.halts``); each still writes its ``rejected`` row and is counted."""


def warn_refusal(message: WakeMessage, refusal: Refusal) -> None:
    """Log one refusal, rate-limited per kind (except those of ``_LOGGED_ELSEWHERE``)."""
    kind = refusal.kind
    warnings = _refusal_warnings[kind]
    if kind is RefusalKind.PRICE:
        warnings.warning(
            why=refusal.reason,
            wire_price_yes_dollars=message.wire_price_yes_dollars,
            dry_run=message.dry_run,
            correlation_id=message.correlation_id,
            market_ticker=message.market_ticker,
        )
    elif kind is RefusalKind.PERMISSION:
        warnings.warning(reason=refusal.reason, dry_run=message.dry_run)
    elif kind not in _LOGGED_ELSEWHERE:
        warnings.warning(
            reason=refusal.reason,
            correlation_id=message.correlation_id,
            market_ticker=message.market_ticker,
        )
