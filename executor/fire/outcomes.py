"""How fires end and how many ended each way: the fire path's outcome and counters (DISPATCH.md
§1 defines each counter; ``executor.fire.path`` counts them)."""

from __future__ import annotations

import dataclasses
import enum


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
    """Orders of unknown outcome the exchange did not have, or could not be asked about."""
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
    adopted: int = 0
    """Orders of this installation the exchange had and the table lacked (rows written)."""
    foreign_orders: int = 0
    """Other clients' orders the last adoption pass listed (left alone)."""
