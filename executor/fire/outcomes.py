"""How fires end and how many ended each way: the fire path's outcome and counters (DISPATCH.md
§1 defines each counter; ``executor.fire.path`` counts them)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Final, Protocol

from executor.decide.decision import Refusal, RefusalKind
from executor.logs import RateLimitedWarning
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
    DISPATCH_ERROR = "dispatch_error"
    SHADOW_SKIPPED = "shadow_skipped"


@dataclasses.dataclass(frozen=True, slots=True)
class FireCounters:
    """Outcomes of the fires a ``FirePath`` has handled (DISPATCH.md §1 defines each)."""

    fired: int
    refused_price: int
    refused_kill_switch: int
    refused_volume: int = 0
    refused_risk: int = 0
    refused_permission: int = 0
    dispatch_errors: int = 0
    shadow_skipped: int = 0
    reconciled: int = 0
    """Orders of unknown outcome the exchange had (their rows corrected; start-up's included)."""
    reconcile_failed: int = 0
    """Orders of unknown outcome the exchange does not have, by its own data (absent)."""
    presigned: int = 0
    signed_inline: int = 0
    refused_audit: int = 0
    stream_connected: int = 0
    """1 while the exchange's stream is connected and reconciled (trusted), else 0."""
    stream_reconnects: int = 0
    stream_fill_messages: int = 0
    stream_order_messages: int = 0
    stream_fills_applied: int = 0
    """Maker fills the stream brought to a row and the risk gate."""
    stream_orders_applied: int = 0
    """``user_order`` totals the stream brought to a row."""
    cancels_sent: int = 0
    """Resting orders named in batch cancels (kill switch engage, shutdown)."""
    cancels_failed: int = 0
    """Of those, the ones the exchange did not cancel (or a batch that failed)."""
    order_group_triggered: int = 0
    """1 while this executor has its order group triggered, else 0."""
    write_token_waits: int = 0
    """Times a write (an order, a cancel, a group call) waited for rate-limit tokens."""
    read_token_waits: int = 0
    """Times a read (the poll, a lookup) waited for rate-limit tokens."""
    adopted: int = 0
    """Orders of this installation the exchange had and the table lacked (rows written)."""
    foreign_orders: int = 0
    """Other clients' orders the last adoption pass listed (left alone)."""

    lookups_unknown: int = 0
    """Lookups that ended neither found nor absent (the row stays open and is asked again)."""
    orders_open: int = 0
    """Orders followed now because the exchange has not said how they ended (a gauge)."""


class BookCounters(Protocol):
    """The book guard's counters and its order group's state
    (``executor.exchange.book.guard.BookGuard``)."""

    cancels_sent: int
    cancels_failed: int

    @property
    def group_triggered(self) -> bool: ...

    async def wait_group_open(self) -> bool:
        """Wait (bounded) until the order group is reset; whether it is open."""
        ...


def book_counts(client: object, book: BookCounters | None) -> dict[str, int]:
    """The book's and the rate limits' counters: the book guard's, and the waits of the
    transport's buckets (``client.rest.limits``) when there is one."""
    counts: dict[str, int] = {}
    limits = getattr(getattr(client, "rest", None), "limits", None)
    if limits is not None:
        counts["write_token_waits"] = int(limits.write.waits)
        counts["read_token_waits"] = int(limits.read.waits)
    if book is not None:
        counts["cancels_sent"] = book.cancels_sent
        counts["cancels_failed"] = book.cancels_failed
        counts["order_group_triggered"] = int(book.group_triggered)
    return counts


# Per-fire refusals are rate-limited per kind: a hostile or broken poller must not flood the log.
_refusal_warnings: Final = {kind: RateLimitedWarning(f"fire_{kind.value}") for kind in RefusalKind}


def warn_refusal(message: WakeMessage, refusal: Refusal) -> None:
    """Log one refusal, rate-limited per kind (an audit refusal is logged by the fire path
    itself, at ERROR with its would-be row, every one of them)."""
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
    elif kind is not RefusalKind.AUDIT:
        warnings.warning(
            reason=refusal.reason,
            correlation_id=message.correlation_id,
            market_ticker=message.market_ticker,
        )
