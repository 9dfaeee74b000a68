"""Every counter the executor reports, each written once: its name, help, kind and owner.

The two exit lines, the Prometheus metrics with their help and the snapshot classes of
``executor.recording.counting.counters`` are all derived from :data:`SERVER_COUNTERS` and
:data:`TELEMETRY_COUNTERS`; nothing else spells the list out. A new counter is one entry here
(at the end of its list, so the exit line only grows at its end) and the code that counts it
(the owner its :class:`Owner` names). SERVICE.md and DISPATCH.md define the older ones.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class CounterKind(enum.Enum):
    """How a counter moves, which is what Prometheus is told."""

    COUNTER = "counter"
    """Only goes up, from 0 at start."""
    GAUGE = "gauge"
    """Goes up and down: a state (1 or 0) or a number held now."""


class Owner(enum.Enum):
    """Where a counter lives: the part of the executor that counts it."""

    SERVER = "server"
    """``executor.server`` and the frame loop (``executor.wire.connection``)."""
    FIRE = "fire"
    """The fire path (``executor.fire.path``): how each fire ended."""
    LOGS = "logs"
    """The log pipeline (``executor.logs``)."""
    RECONCILER = "reconciler"
    """Following orders (``executor.exchange.follow.reconcile``)."""
    TRANSPORT = "transport"
    """The order transport (``executor.exchange.orders.transport``): how orders were signed."""
    STREAM = "stream"
    """The exchange's stream (``executor.exchange.stream``)."""
    BOOK = "book"
    """The book guard (``executor.exchange.book.guard``): cancels and the order group."""
    RATE_LIMITS = "rate_limits"
    """The transport's token buckets (``executor.exchange.rate_limits``)."""
    ADOPTION = "adoption"
    """Adoption (``executor.exchange.follow.adoption``)."""
    HALTS = "halts"
    """The exchange's own halts (``executor.exchange.halts``): its trigger of the group, pauses."""
    TELEMETRY = "telemetry"
    """The telemetry channel and its writer (``executor.telemetry``, ``recording.consumer``)."""


ORDER_PATH_OWNERS: Final = frozenset(
    {
        Owner.RECONCILER,
        Owner.TRANSPORT,
        Owner.STREAM,
        Owner.BOOK,
        Owner.RATE_LIMITS,
        Owner.ADOPTION,
        Owner.HALTS,
    }
)
"""The owners that exist only with an exchange; the composition root gathers their counters."""


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """One counter: what it is called, what it means and who counts it.

    Attributes:
        name: the exit line's key and the metric's name after its prefix.
        help: one line, the metric's help text.
        owner: the part of the executor that counts it.
        kind: a counter (only up) or a gauge.
        on_exit_line: whether the exit line prints it (a few are metrics only).
        metric: the metric's name after the prefix when it is not ``name``.
    """

    name: str
    help: str
    owner: Owner
    kind: CounterKind = CounterKind.COUNTER
    on_exit_line: bool = True
    metric: str | None = None

    @property
    def metric_name(self) -> str:
        """The metric's name after the namespace (and its list's prefix)."""
        return self.metric or self.name


_GAUGE: Final = CounterKind.GAUGE


SERVER_COUNTERS: Final[tuple[CounterSpec, ...]] = (
    # The C++ port's keys, in its order.
    CounterSpec("frames", "wake frame bodies read", Owner.SERVER),
    CounterSpec("accepted", "frames that decoded (an accepted ack was due)", Owner.SERVER),
    CounterSpec("rejected", "frames that did not decode (a rejected ack)", Owner.SERVER),
    CounterSpec("fired", "fires that reached the dispatch (shadow or real)", Owner.FIRE),
    CounterSpec("refused_price", "fires refused: the price could not be snapped", Owner.FIRE),
    CounterSpec(
        "refused_kill_switch", "real fires refused: the kill switch is engaged", Owner.FIRE
    ),
    # This executor's keys, oldest first; a new key goes at the end of the line.
    CounterSpec(
        "unacked", "accepted frames whose ack could not be written (peer gone)", Owner.SERVER
    ),
    CounterSpec(
        "fires_cancelled", "fires still running when the shutdown grace ran out", Owner.SERVER
    ),
    CounterSpec("fire_errors", "fires that raised outside the dispatch (logged)", Owner.SERVER),
    CounterSpec("refused_volume", "real fires refused by sizing (no contract to send)", Owner.FIRE),
    CounterSpec("refused_risk", "real fires refused by the risk gate", Owner.FIRE),
    CounterSpec("refused_permission", "real fires refused by the production guard", Owner.FIRE),
    CounterSpec("dispatch_errors", "real dispatches that failed (a subset of fired)", Owner.FIRE),
    CounterSpec("shadow_skipped", "shadow fires skipped: the shadow lane was full", Owner.FIRE),
    CounterSpec("log_dropped", "log records dropped: stderr was not read fast enough", Owner.LOGS),
    CounterSpec(
        "reconciled",
        "orders of unknown outcome the exchange had (rows corrected)",
        Owner.RECONCILER,
    ),
    CounterSpec(
        "reconcile_failed", "orders of unknown outcome the exchange does not have", Owner.RECONCILER
    ),
    CounterSpec("presigned", "real orders sent with a signature made ahead", Owner.TRANSPORT),
    CounterSpec("signed_inline", "real orders signed in their own fire", Owner.TRANSPORT),
    CounterSpec(
        "refused_audit", "real fires refused: the audit trail could not be written", Owner.FIRE
    ),
    CounterSpec(
        "stream_connected",
        "1 while the exchange's stream is connected and reconciled, else 0",
        Owner.STREAM,
        kind=_GAUGE,
    ),
    CounterSpec("stream_reconnects", "stream connections after the first", Owner.STREAM),
    CounterSpec("stream_fill_messages", "fill messages the stream delivered", Owner.STREAM),
    CounterSpec("stream_order_messages", "user_order messages the stream delivered", Owner.STREAM),
    CounterSpec(
        "stream_fills_applied",
        "maker fills the stream brought to a row and the risk gate",
        Owner.STREAM,
    ),
    CounterSpec(
        "stream_orders_applied", "user_order totals the stream brought to a row", Owner.STREAM
    ),
    CounterSpec(
        "cancels_sent", "resting orders named in batch cancels (kill switch, shutdown)", Owner.BOOK
    ),
    CounterSpec(
        "cancels_failed", "of the orders named in batch cancels, those not cancelled", Owner.BOOK
    ),
    CounterSpec(
        "order_group_triggered",
        "1 while the order group is triggered (by this executor or by the exchange)",
        Owner.BOOK,
        kind=_GAUGE,
    ),
    CounterSpec(
        "write_token_waits",
        "times a write (order, cancel, group call) waited for rate-limit tokens",
        Owner.RATE_LIMITS,
    ),
    CounterSpec(
        "read_token_waits",
        "times a read (account poll, lookup) waited for rate-limit tokens",
        Owner.RATE_LIMITS,
    ),
    CounterSpec(
        "lookups_unknown",
        "order lookups that ended neither found nor absent (asked again)",
        Owner.RECONCILER,
    ),
    CounterSpec(
        "orders_open",
        "orders followed now because the exchange has not said how they ended",
        Owner.RECONCILER,
        kind=_GAUGE,
    ),
    CounterSpec(
        "adopted",
        "orders of this installation the exchange had and the table lacked",
        Owner.ADOPTION,
    ),
    CounterSpec(
        "refused_order_group",
        "real fires refused before sending: the exchange had triggered the order group",
        Owner.FIRE,
    ),
    CounterSpec(
        "refused_paused",
        "real fires refused before sending: the exchange paused trading",
        Owner.FIRE,
    ),
    CounterSpec(
        "trading_paused",
        "1 while the exchange pauses trading (GET /exchange/status), else 0",
        Owner.HALTS,
        kind=_GAUGE,
    ),
    # Metrics only: not on the exit line.
    CounterSpec(
        "oversized_frames",
        "frames whose length prefix exceeded the limit",
        Owner.SERVER,
        on_exit_line=False,
    ),
    CounterSpec(
        "connections_opened", "poller connections accepted", Owner.SERVER, on_exit_line=False
    ),
    CounterSpec(
        "connections_open",
        "poller connections open now",
        Owner.SERVER,
        kind=_GAUGE,
        on_exit_line=False,
    ),
    CounterSpec(
        "foreign_orders",
        "other clients' orders the last adoption pass listed and left alone",
        Owner.ADOPTION,
        kind=_GAUGE,
        on_exit_line=False,
    ),
)
"""The first exit line's counters in its order, then the metrics-only ones (``trio_executor_``)."""


TELEMETRY_COUNTERS: Final[tuple[CounterSpec, ...]] = (
    # The C++ port's keys, in its order.
    CounterSpec("rows_written", "latency_events rows written", Owner.TELEMETRY),
    CounterSpec(
        "dropped_ring_full", "latency rows dropped: the telemetry channel was full", Owner.TELEMETRY
    ),
    CounterSpec(
        "dropped_oversized_id",
        "latency rows dropped: an identifier too long to store",
        Owner.TELEMETRY,
    ),
    CounterSpec(
        "dropped_write_failed", "latency rows dropped: the database refused them", Owner.TELEMETRY
    ),
    # This executor's keys, oldest first.
    CounterSpec("order_rows_written", "orders_fired rows written", Owner.TELEMETRY),
    CounterSpec(
        "order_rows_dropped",
        "orders_fired rows dropped (channel full, no room in time, refused)",
        Owner.TELEMETRY,
    ),
    CounterSpec("audit_outages", "times the audit trail became unavailable", Owner.TELEMETRY),
    CounterSpec(
        "audit_unavailable",
        "1 while the audit trail cannot be written and real fires are refused",
        Owner.TELEMETRY,
        kind=_GAUGE,
    ),
    CounterSpec(
        "order_rows_kept",
        "order rows refused for a reason that may pass, kept in the intent journal",
        Owner.TELEMETRY,
    ),
    CounterSpec(
        "journal_replayed",
        "rows start-up wrote from the intent journal (the database lacked them)",
        Owner.TELEMETRY,
    ),
    CounterSpec(
        "journal_torn",
        "intent-journal records start-up skipped: cut short or corrupt",
        Owner.TELEMETRY,
    ),
    # Metrics only: not on the exit line.
    CounterSpec(
        "queued",
        "rows waiting in the telemetry channel",
        Owner.TELEMETRY,
        kind=_GAUGE,
        on_exit_line=False,
        metric="channel_depth",
    ),
    CounterSpec(
        "batches_committed",
        "batches committed as one transaction",
        Owner.TELEMETRY,
        on_exit_line=False,
    ),
    CounterSpec(
        "intents_unrecorded",
        "real orders not sent: their intent record could not be written",
        Owner.TELEMETRY,
        on_exit_line=False,
    ),
    CounterSpec(
        "order_rows_owed",
        "order rows kept in the intent journal, not yet written",
        Owner.TELEMETRY,
        kind=_GAUGE,
        on_exit_line=False,
    ),
)
"""The second exit line's counters in its order, then the metrics-only ones
(``trio_executor_telemetry_``)."""


def names_of(specs: tuple[CounterSpec, ...], *owners: Owner) -> tuple[str, ...]:
    """The names of the counters in ``specs`` that ``owners`` count (every one without owners)."""
    return tuple(spec.name for spec in specs if not owners or spec.owner in owners)


__all__ = [
    "ORDER_PATH_OWNERS",
    "SERVER_COUNTERS",
    "TELEMETRY_COUNTERS",
    "CounterKind",
    "CounterSpec",
    "Owner",
    "names_of",
]
