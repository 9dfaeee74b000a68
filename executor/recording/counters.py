"""The counters the executor reports: snapshots for the exit lines and the metrics endpoint.

Plain values, no I/O. The server fills a :class:`ServerStatistics` from its frame counters and the
fire path's; the telemetry consumer keeps a :class:`TelemetryCounters` that
``Telemetry.statistics()`` turns into a :class:`TelemetryStatistics`. The command line prints both
at exit (:meth:`ServerStatistics.counters_line`, :meth:`TelemetryStatistics.exit_line`), and
``executor.recording.metrics`` serves the same fields to Prometheus. They live in this low layer so
the metrics endpoint can read them without importing the server or the telemetry channel that
produce them. SERVICE.md defines every counter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerStatistics:
    """Counters of frames and fires since start (SERVICE.md defines each)."""

    frames: int
    accepted: int
    rejected: int
    fired: int
    refused_price: int
    refused_kill_switch: int
    unacked: int
    fires_cancelled: int
    fire_errors: int
    refused_volume: int
    refused_risk: int
    refused_permission: int
    dispatch_errors: int
    shadow_skipped: int
    oversized_frames: int
    connections_opened: int
    connections_open: int
    reconciled: int = 0
    reconcile_failed: int = 0
    presigned: int = 0
    signed_inline: int = 0
    refused_audit: int = 0
    """Real fires refused because the audit trail (``orders_fired``) could not be written."""
    stream_connected: int = 0
    """1 while the exchange's stream is connected and reconciled (trusted), else 0 (a gauge)."""
    stream_reconnects: int = 0
    stream_fill_messages: int = 0
    stream_order_messages: int = 0
    stream_fills_applied: int = 0
    stream_orders_applied: int = 0
    cancels_sent: int = 0
    """Resting orders named in batch cancels (kill switch engage, shutdown)."""
    cancels_failed: int = 0
    """Of those, the ones the exchange did not cancel."""
    order_group_triggered: int = 0
    """1 while this executor has its order group triggered (the exchange refuses its orders)."""
    write_token_waits: int = 0
    """Times a write (order, cancel, order group) waited for rate-limit tokens."""
    read_token_waits: int = 0
    """Times a read (account poll, lookup) waited for rate-limit tokens."""
    lookups_unknown: int = 0
    """Order lookups that ended neither found nor absent (the row stays open, asked again)."""
    orders_open: int = 0
    """Orders followed now because the exchange has not said how they ended (a gauge)."""
    adopted: int = 0
    """Orders of this installation found on the exchange with no row (rows written for them)."""
    foreign_orders: int = 0
    """Other clients' orders the last adoption pass listed and left alone (a gauge)."""

    def counters_line(self) -> str:
        """The first exit line, in the C++ port's key=value format plus this executor's keys."""
        return (
            f"frames={self.frames} accepted={self.accepted} rejected={self.rejected} "
            f"fired={self.fired} refused_price={self.refused_price} "
            f"refused_kill_switch={self.refused_kill_switch} unacked={self.unacked} "
            f"fires_cancelled={self.fires_cancelled} fire_errors={self.fire_errors} "
            f"refused_volume={self.refused_volume} refused_risk={self.refused_risk} "
            f"refused_permission={self.refused_permission} "
            f"dispatch_errors={self.dispatch_errors} shadow_skipped={self.shadow_skipped}"
        )

    def later_counters(self) -> str:
        """The keys the exit line gained after ``log_dropped``, oldest first (reconciliation's,
        signing ahead's, the audit trail's, the stream's, the book's and the rate limits', the
        three-state lookups', adoption's), which the command line prints after every older key;
        a new key goes at the end."""
        return (
            f"reconciled={self.reconciled} reconcile_failed={self.reconcile_failed} "
            f"presigned={self.presigned} signed_inline={self.signed_inline} "
            f"refused_audit={self.refused_audit} "
            f"stream_connected={self.stream_connected} "
            f"stream_reconnects={self.stream_reconnects} "
            f"stream_fill_messages={self.stream_fill_messages} "
            f"stream_order_messages={self.stream_order_messages} "
            f"stream_fills_applied={self.stream_fills_applied} "
            f"stream_orders_applied={self.stream_orders_applied} "
            f"cancels_sent={self.cancels_sent} cancels_failed={self.cancels_failed} "
            f"order_group_triggered={self.order_group_triggered} "
            f"write_token_waits={self.write_token_waits} read_token_waits={self.read_token_waits} "
            f"lookups_unknown={self.lookups_unknown} orders_open={self.orders_open} "
            f"adopted={self.adopted}"
        )


@dataclass(frozen=True, slots=True)
class TelemetryStatistics:
    """A snapshot of the telemetry counters.

    The first four count ``latency_events`` rows only. ``batches_committed`` counts batches
    committed as one transaction (a batch retried row by row does not count); ``queued`` is the
    rows in the channel at the time of the snapshot (every kind). ``order_rows_written`` and
    ``order_rows_dropped`` count ``orders_fired`` rows (dropped: a pending row that found the
    channel full, an undroppable row that found no room in time, a row the database refused).
    """

    rows_written: int
    dropped_ring_full: int
    dropped_oversized_id: int
    dropped_write_failed: int
    queued: int
    batches_committed: int = 0
    order_rows_written: int = 0
    order_rows_dropped: int = 0
    audit_outages: int = 0
    """Times the audit trail became unavailable (an order or heartbeat row the database refused,
    with nothing of either kind written in the same batch)."""
    audit_unavailable: int = 0
    """1 while the audit trail is unavailable (real fires refused), else 0."""
    order_rows_kept: int = 0
    """Order rows the database refused for a reason that may pass, kept in the intent journal
    and written once the trail is back (``order_rows_written`` counts them then)."""
    journal_replayed: int = 0
    """Rows start-up wrote from the intent journal because the database lacked them."""
    journal_torn: int = 0
    """Intent-journal records start-up skipped: cut short or corrupt (a kill mid-write)."""
    intents_unrecorded: int = 0
    """Real orders not sent because their intent record could not be written."""
    order_rows_owed: int = 0
    """Kept rows not yet written (now)."""

    def exit_line(self) -> str:
        """The second exit line: where every latency row and every order row went."""
        return (
            f"telemetry rows_written={self.rows_written} "
            f"dropped_ring_full={self.dropped_ring_full} "
            f"dropped_oversized_id={self.dropped_oversized_id} "
            f"dropped_write_failed={self.dropped_write_failed} "
            f"order_rows_written={self.order_rows_written} "
            f"order_rows_dropped={self.order_rows_dropped} "
            f"audit_outages={self.audit_outages} audit_unavailable={self.audit_unavailable} "
            f"order_rows_kept={self.order_rows_kept} journal_replayed={self.journal_replayed} "
            f"journal_torn={self.journal_torn}"
        )


@dataclass(slots=True)
class TelemetryCounters:
    """The live telemetry counters, mutated only from the Trio thread.

    Every latency row handed to ``Telemetry.record`` ends up in exactly one of ``rows_written``,
    ``dropped_ring_full``, ``dropped_oversized_id`` or ``dropped_write_failed``.
    """

    rows_written: int = 0
    dropped_ring_full: int = 0
    dropped_oversized_id: int = 0
    dropped_write_failed: int = 0
    batches_committed: int = 0
    order_rows_written: int = 0
    order_rows_dropped: int = 0
    audit_outages: int = 0
    audit_available: bool = True
    """False from a failed audit write (order or heartbeat row) until one succeeds again."""
    order_rows_kept: int = 0
    journal_replayed: int = 0
    journal_torn: int = 0
    intents_unrecorded: int = 0

    def snapshot(self, queued: int, owed: int = 0) -> TelemetryStatistics:
        """The counters now, with ``queued`` rows waiting in the channel and ``owed`` rows
        waiting for the audit trail."""
        return TelemetryStatistics(
            rows_written=self.rows_written,
            dropped_ring_full=self.dropped_ring_full,
            dropped_oversized_id=self.dropped_oversized_id,
            dropped_write_failed=self.dropped_write_failed,
            queued=queued,
            batches_committed=self.batches_committed,
            order_rows_written=self.order_rows_written,
            order_rows_dropped=self.order_rows_dropped,
            audit_outages=self.audit_outages,
            audit_unavailable=int(not self.audit_available),
            order_rows_kept=self.order_rows_kept,
            journal_replayed=self.journal_replayed,
            journal_torn=self.journal_torn,
            intents_unrecorded=self.intents_unrecorded,
            order_rows_owed=owed,
        )


__all__ = ["ServerStatistics", "TelemetryCounters", "TelemetryStatistics"]
