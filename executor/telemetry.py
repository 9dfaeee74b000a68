"""Telemetry: latency rows into SQLite, never in the way of the hot path.

The face of the telemetry layer. Producers (connection tasks, fire tasks) hand rows to
:class:`Telemetry`; :func:`serve_telemetry` opens the database, starts the one consumer and closes
it in order. :meth:`Telemetry.record` does one ``send_nowait`` into a bounded Trio memory channel
and returns; a full (or closed) channel drops the row and counts it. The consumer
(:class:`executor.recording.consumer.TelemetryConsumer`) batches what it receives and commits each
batch as one transaction in a worker thread, one thread at a time. The tables and columns are the
reference system's, so its benchmark query and its poller can share the file (TELEMETRY.md).

Every row handed to :meth:`Telemetry.record` ends up in exactly one counter: ``rows_written``,
``dropped_ring_full``, ``dropped_oversized_id`` or ``dropped_write_failed``.

The same channel carries the ``orders_fired`` audit rows and heartbeats (DISPATCH.md §8). A
pending order row is droppable (:meth:`Telemetry.record_pending`: its resolution recreates it);
resolutions and rejections are not (:meth:`Telemetry.record_order` waits for room, bounded, from a
fire task, never from the connection loop). Order rows are counted apart, in ``order_rows_written``
and ``order_rows_dropped``, and every dropped one is logged with the row, so the latency identity
above is untouched. Heartbeats are counted in neither family.

With an exchange (``intent_journal=True``) the file has an intent journal beside it
(``executor.recording.orders.intent_journal``): :meth:`Telemetry.record_intent` appends a real
order's pending row there with one ``os.write`` before the order is sent, so a SIGKILL cannot take
it; start-up first replays what an earlier run left (``executor.recording.orders.journal_replay``).
Rows the database refuses while the audit trail is down are kept in the same journal and written
when it is back (:attr:`Telemetry.audit_trail`: its state, transitions and the rows it is owed).
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Final

import structlog
import trio

from executor.recording.audit_trail import AuditTrailState
from executor.recording.consumer import BATCH_LINGER_S, BATCH_MAX_ROWS, TelemetryConsumer
from executor.recording.counting.counters import TelemetryCounters, TelemetryStatistics
from executor.recording.database import TelemetryOpenError, database_files, remove_new_files
from executor.recording.database_lock import DatabaseLock, open_locked_database
from executor.recording.orders.intent_journal import (
    IntentJournal,
    JournalWriteError,
    RecordFields,
    journal_path,
)
from executor.recording.orders.journal_replay import replay_journal
from executor.recording.rows import (
    HeartbeatRow,
    LatencyRow,
    OrderRow,
    Stage,
    TelemetryRow,
    latency_row,
    row_fields,
    wake_recv_row,
)
from executor.recording.schema import REFERENCE_USER_VERSION
from executor.recording.writer_yield import yield_below
from executor.runtime.thread_priority import WriterPriority

CHANNEL_CAPACITY: Final = 8192
"""Rows the channel holds (rows). Several seconds of wakes at any plausible rate, while a commit of
500 rows takes milliseconds; a guess sized so a slow disk sheds rows rather than memory."""

DRAIN_TIMEOUT_S: Final = 10.0
"""How long a cancelled consumer may keep writing what it holds (seconds). Covers one full
``busy_timeout`` wait (5 s) plus a full channel's worth of batches; a guess, not a measurement."""

CLOSE_TIMEOUT_S: Final = 5.0
"""How long closing the database may take in the worker (seconds): the final WAL checkpoint of a
few MiB; past it the connection is closed on the Trio thread instead. A guess."""

ORDER_ROW_TIMEOUT_S: Final = 2.0
"""How long :meth:`Telemetry.record_order` waits for room in the channel (seconds): DISPATCH.md
§4's bound for a fire task waiting to queue its resolution."""

logger = structlog.get_logger()


class Telemetry:
    """The producer side of the telemetry channel, handed to the server."""

    __slots__ = ("_closed", "_counters", "_journal", "_keeping_up_below", "_send", "audit_trail")

    def __init__(
        self,
        send: trio.MemorySendChannel[TelemetryRow],
        counters: TelemetryCounters,
        closed: trio.Event,
        audit_trail: AuditTrailState | None = None,
    ) -> None:
        self._send = send
        self._keeping_up_below = yield_below(send.statistics().max_buffer_size)
        self._counters = counters
        self._closed = closed
        self.audit_trail = audit_trail or AuditTrailState(counters, Path("telemetry"))
        """The audit trail's state: ``on_change`` attaches to its outage transitions."""
        self._journal = self.audit_trail.journal

    @property
    def journal(self) -> IntentJournal | None:
        """The intent journal (None without an exchange)."""
        return self._journal

    def record_intent(self, fields: RecordFields) -> None:
        """Append a real order's pending row (its record's fields,
        ``executor.exchange.orders.rows.pending_record``) to the intent journal: one
        ``os.write``, before the order's first byte leaves (the one file-system call the order
        path makes between the decision and the send; measured in docs/performance/notebook/).
        Without a journal, nothing.

        Raises:
            JournalWriteError: the record could not be written (counted in
                ``intents_unrecorded``): the order must not be sent.
        """
        journal = self._journal
        if journal is None:
            return
        try:
            journal.append_fields(fields)
        except JournalWriteError:
            self._counters.intents_unrecorded += 1
            raise

    def record(self, row: LatencyRow) -> None:
        """Queue ``row`` for writing, or drop and count it; never blocks, never raises.

        A closed channel (after :meth:`close`, or once the consumer has stopped receiving during
        shutdown) counts as ``dropped_ring_full`` too: the row had nowhere to go.
        """
        try:
            self._send.send_nowait(row)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._counters.dropped_ring_full += 1

    def record_pending(self, row: OrderRow) -> None:
        """Queue a pending order row, or drop it (ERROR log with the row, counted); never waits.

        Dropping is safe: the resolution upserts the whole row (DISPATCH.md §4 step 4).
        """
        try:
            self._send.send_nowait(row)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._counters.order_rows_dropped += 1
            logger.error("order row dropped: telemetry channel full", row=row_fields(row))

    async def record_order(
        self, row: OrderRow | HeartbeatRow, *, timeout_s: float = ORDER_ROW_TIMEOUT_S
    ) -> None:
        """Queue an undroppable row, waiting up to ``timeout_s`` for room; never raises.

        An order row that still finds no room (or a closed channel) is logged at ERROR with the
        whole row and counted in ``order_rows_dropped``; a heartbeat gets one warning. Only fire
        and background tasks call this, never the connection loop.

        Cancellation: shielded for at most ``timeout_s``, so a fire cut by shutdown still queues
        its resolution; the caller's cancellation lands at its next checkpoint.
        """
        with trio.move_on_after(timeout_s, shield=True):
            try:
                await self._send.send(row)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                pass
            else:
                return
        if isinstance(row, OrderRow):
            self._counters.order_rows_dropped += 1
            logger.error("order row dropped: telemetry channel full or closed", row=row_fields(row))
        else:
            logger.warning(
                "heartbeat row dropped: telemetry channel full or closed", row=asdict(row)
            )

    def close(self) -> None:
        """Close the send side; the consumer then drains what is queued, commits and returns."""
        self._send.close()
        self._closed.set()

    @property
    def audit_available(self) -> bool:
        """False while order rows cannot be written (the decision refuses real fires then)."""
        return self._counters.audit_available

    def writer_keeping_up(self) -> bool:
        """True while the rows waiting in the channel are fewer than the backlog at which the
        writer stops yielding to the loop: a burst, not a flood
        (``executor.recording.writer_yield``). One length read; the connection loop asks it
        before reading between batches."""
        return self._send.statistics().current_buffer_used < self._keeping_up_below

    def statistics(self) -> TelemetryStatistics:
        """The counters now, and how many rows wait in the channel."""
        return self._counters.snapshot(
            self._send.statistics().current_buffer_used, self.audit_trail.owed
        )


async def serve_telemetry(
    db_path: os.PathLike[str] | str,
    *,
    capacity: int = CHANNEL_CAPACITY,
    batch_max_rows: int = BATCH_MAX_ROWS,
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    linger_s: float = BATCH_LINGER_S,
    observe: Callable[[TelemetryRow], None] | None = None,
    require_writable: bool = False,
    intent_journal: bool = False,
    share_group: int | None = None,
    writer_priority: WriterPriority = "yield",
    task_status: trio.TaskStatus[Telemetry] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open the database, hand back a :class:`Telemetry`, and write rows until it is closed.

    Meant for ``telemetry = await nursery.start(serve_telemetry, path)``: the database is open and
    its schema in place before ``start`` returns. Returns once :meth:`Telemetry.close` has been
    called and every queued row is committed and the database closed. ``observe``, when given, is
    called with each row the consumer takes off the channel (on the Trio thread, off the hot path).
    ``require_writable`` (an executor with an exchange: no trading without an audit trail) commits
    one write before ``started``, so a database that opens but cannot be written stops start-up.
    ``intent_journal`` (an executor with an exchange) replays the intent journal an earlier run
    left into the database, then opens it empty for :meth:`Telemetry.record_intent`. A database
    this call creates is its owner's alone (0600), or ``share_group``'s too (0660; the socket's
    ``--socket-group``, for a poller of another user). ``writer_priority`` (``serve
    --writer-priority``) is how the writer thread gives way to the loop's: ``yield``, the default,
    by itself (``executor.recording.writer_yield``), ``low`` or ``idle`` by the kernel
    (``executor.runtime.thread_priority``).

    Raises:
        TelemetryOpenError: before ``started``, when the database cannot be opened or initialised
            (or, with ``require_writable``, written; or, with ``intent_journal``, the journal
            cannot be replayed or opened).

    Cancellation: the rows held and queued are still written, shielded, for at most
    ``drain_timeout_s`` (a batch already in the worker thread always completes); rows not written
    by then are counted as ``dropped_write_failed``. Rows recorded after that are counted as
    ``dropped_ring_full``.
    """
    path = Path(db_path)
    one_thread_at_a_time = trio.CapacityLimiter(1)
    existed = await trio.to_thread.run_sync(database_files, path)
    lock = DatabaseLock(path, share_group)
    await trio.to_thread.run_sync(lock.acquire)
    counters = TelemetryCounters()
    journal: IntentJournal | None = None
    try:
        connection, created = await trio.to_thread.run_sync(
            functools.partial(open_locked_database, lock, require_writable=require_writable),
            limiter=one_thread_at_a_time,
        )
        if intent_journal:
            try:
                journal = await trio.to_thread.run_sync(
                    _replay_and_open_journal,
                    connection,
                    path,
                    counters,
                    limiter=one_thread_at_a_time,
                )
            except BaseException:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(connection.close, limiter=one_thread_at_a_time)
                raise
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(remove_new_files, path, existed)
        lock.release()
        raise
    trail = AuditTrailState(counters, path, journal)
    send, receive = trio.open_memory_channel[TelemetryRow](capacity)
    closed = trio.Event()
    consumer = TelemetryConsumer(
        receive,
        connection,
        path,
        counters,
        batch_max_rows,
        one_thread_at_a_time,
        linger_s,
        closed,
        observe,
        trail,
        writer_priority,
    )
    try:
        logger.info("telemetry database open", path=str(path), created=created)
        task_status.started(Telemetry(send, counters, closed, trail))
        await consumer.run()
    finally:
        with trio.move_on_after(drain_timeout_s, shield=True):
            await consumer.drain()
        consumer.discard_remaining()
        await consumer.close_database(CLOSE_TIMEOUT_S)
        if journal is not None:
            _close_journal(journal)
        lock.release()  # after the connection: closing a descriptor drops SQLite's POSIX locks


def _replay_and_open_journal(
    connection: sqlite3.Connection, path: Path, counters: TelemetryCounters
) -> IntentJournal:
    """Write what the intent journal knows and the database lacks, then open it empty
    (blocking: the writer thread, before the consumer starts).

    Raises:
        TelemetryOpenError: the journal cannot be replayed or opened.
    """
    replay = replay_journal(connection, path)
    counters.journal_replayed = replay.replayed
    counters.journal_torn = replay.torn
    try:
        return IntentJournal.open(journal_path(path), truncate=True)
    except OSError as error:
        raise TelemetryOpenError(
            f"cannot open the intent journal {journal_path(path)}: {error}"
        ) from None


def _close_journal(journal: IntentJournal) -> None:
    """Leave only what the database lacks in the journal; a failure is one warning (the next
    start-up replays a longer file, nothing is lost)."""
    try:
        journal.close()
    except OSError as error:
        logger.warning("intent journal close failed", path=str(journal.path), error=str(error))


__all__ = [
    "BATCH_LINGER_S",
    "BATCH_MAX_ROWS",
    "CHANNEL_CAPACITY",
    "ORDER_ROW_TIMEOUT_S",
    "REFERENCE_USER_VERSION",
    "HeartbeatRow",
    "LatencyRow",
    "OrderRow",
    "Stage",
    "Telemetry",
    "TelemetryOpenError",
    "TelemetryRow",
    "TelemetryStatistics",
    "latency_row",
    "row_fields",
    "serve_telemetry",
    "wake_recv_row",
]
