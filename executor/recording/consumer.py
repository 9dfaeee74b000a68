"""The telemetry consumer: takes rows off the channel, batches them, writes each batch in a thread.

``executor.telemetry`` owns the channel and the consumer's lifetime (``serve_telemetry``); this is
the task's body. It receives a row, gathers whatever else is already queued (up to the batch
size), waits up to ``BATCH_LINGER_S`` for more while the batch is not full (never past the
channel's close), and commits the batch as one transaction in a worker thread
(``executor.recording.sqlite_writer``). Each row's outcome lands in the shared
:class:`~executor.recording.counting.counters.TelemetryCounters`, and a write failure in a
rate-limited log line (``executor.recording.write_failures``).

Thread discipline: one ``sqlite3`` connection, opened with ``check_same_thread=False`` and used by
one thread at a time, enforced with a ``CapacityLimiter(1)``. While :meth:`TelemetryConsumer.run`
runs, one long-lived worker thread (``trio.to_thread.run_sync`` of a loop, holding the limiter)
owns it and takes batches from a queue, at most ``BATCHES_IN_FLIGHT`` at a time; each outcome comes
back to the Trio thread with ``run_sync_soon`` and is counted there. So the next batch is ready
the moment the writer finishes one, without a ``to_thread`` round trip through a busy loop per
batch. At saturation the writer is still asleep about half the time, mostly waiting for the GIL;
its drops and what this bought are in docs/performance/notebook/ (2026-12-01). The drain and the
close use ``trio.to_thread.run_sync`` per call under the same limiter. Moving a connection between
threads is safe with SQLite built thread-safe (CPython's build is), provided no two threads use it
at once.

A batch whose commit fails is rolled back and retried row by row; a row that still fails is
dropped, counted (``dropped_write_failed``) and reported by a rate-limited warning. An order row
refused for good (a CHECK) is logged at ERROR with the whole row (it is the audit trail); one
refused for a reason that may pass is owed instead: kept in the intent journal and handed back at
the front of the next batch until it is written (``executor.recording.audit_trail`` keeps the
trail's state, its transitions and the owed rows).
"""

from __future__ import annotations

import functools
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

import structlog
import trio

from executor.recording.audit_trail import AuditTrailState
from executor.recording.counting.counters import TelemetryCounters
from executor.recording.database import close_database
from executor.recording.rows import HeartbeatRow, LatencyRow, TelemetryRow, row_fields
from executor.recording.sqlite_writer import BatchOutcome, write_batch
from executor.recording.write_failures import FailureWarnings, OrderFailureLog
from executor.recording.writer_yield import BatchYield, yield_below
from executor.runtime import thread_priority
from executor.runtime.loop_watch import LoopWatch
from executor.runtime.thread_priority import WriterPriority

BATCH_MAX_ROWS: Final = 500
"""Most rows committed in one transaction (rows). Large enough to amortise the commit's fsync,
small enough that one batch is a few milliseconds of worker time."""

BATCH_LINGER_S: Final = 0.010
"""How long the consumer waits for more rows when a batch is not full yet (seconds). Committing
each row the moment it arrives costs the event loop a worker-thread round trip per wake, right
when the next wake may be arriving; waiting 10 ms caps commits at ~100/s. Measured in
docs/performance/notebook/ (``--telemetry-linger 0`` restores commit-at-once). Rows land <= 10 ms
later."""

BATCHES_IN_FLIGHT: Final = 2
"""Batches handed to the writer thread and not yet counted (batches): one being written, one
waiting, so the next is ready the moment the writer finishes. More would only hold more rows
outside the channel's count of queued rows."""

MAX_CORRELATION_ID_BYTES: Final = 128
"""Longest correlation_id written (UTF-8 bytes); longer ids are dropped, never truncated."""

_MAX_BYTES_PER_CHAR: Final = 4
"""UTF-8 encodes a code point in at most 4 bytes, so short ids need no encoding to be checked."""

logger = structlog.get_logger()


def _is_oversized(correlation_id: str) -> bool:
    """True when the id's UTF-8 form exceeds ``MAX_CORRELATION_ID_BYTES``."""
    if len(correlation_id) * _MAX_BYTES_PER_CHAR <= MAX_CORRELATION_ID_BYTES:
        return False
    # surrogatepass: an unencodable id is the writer's problem (counted there), not a crash here.
    encoded = correlation_id.encode("utf-8", "surrogatepass")
    return len(encoded) > MAX_CORRELATION_ID_BYTES


class TelemetryConsumer:
    """Receives rows, batches them and writes each batch in the worker thread."""

    def __init__(
        self,
        receive: trio.MemoryReceiveChannel[TelemetryRow],
        connection: sqlite3.Connection,
        path: Path,
        counters: TelemetryCounters,
        batch_max_rows: int,
        limiter: trio.CapacityLimiter,
        linger_s: float = BATCH_LINGER_S,
        closed: trio.Event | None = None,
        observe: Callable[[TelemetryRow], None] | None = None,
        trail: AuditTrailState | None = None,
        writer_priority: WriterPriority = "yield",
    ) -> None:
        self._receive = receive
        self._connection = connection
        self._path = path
        self._counters = counters
        self._batch_max_rows = batch_max_rows
        self._limiter = limiter
        self._linger_s = linger_s
        self._writer_priority = writer_priority
        self._closed = closed if closed is not None else trio.Event()
        self._warnings = FailureWarnings(path)
        self._order_failures = OrderFailureLog(path)
        self._observe = observe
        self.trail = trail if trail is not None else AuditTrailState(counters, path)
        self._held: list[TelemetryRow] = []
        """The batch being gathered or written; cleared only once its outcome is counted."""

    async def run(self) -> None:
        """Write batches until the channel is closed and empty.

        Cancellation: the batches already handed to the writer thread (at most
        ``BATCHES_IN_FLIGHT``) are written and counted before this returns; rows gathered but not
        handed over stay held, for :meth:`drain`.
        """
        jobs: queue.SimpleQueue[list[TelemetryRow] | None] = queue.SimpleQueue()
        in_flight = trio.Semaphore(BATCHES_IN_FLIGHT)
        token = trio.lowlevel.current_trio_token()

        def counted(outcome: BatchOutcome) -> None:  # on the Trio thread
            self._count(outcome)
            in_flight.release()

        loop_thread = threading.get_native_id()  # the writer yields to it while few rows wait
        statistics = self._receive.statistics
        below = yield_below(statistics().max_buffer_size)

        def backlog() -> int:  # read from the writer thread: one length, no lock, no await
            return statistics().current_buffer_used

        def write_batches() -> None:  # the writer thread
            # It gives way to the loop's thread on a shared CPU: by itself (writer_yield) or by
            # the kernel's priorities (thread_priority). No watch: it never yields.
            watch = LoopWatch.of_thread(loop_thread) if self._writer_priority == "yield" else None
            lowered = thread_priority.give_way(self._writer_priority)
            try:
                while (rows := jobs.get()) is not None:
                    between: BatchYield | None = None
                    if watch is not None:
                        between = BatchYield(watch, backlog, below)
                        if not between.worth_slicing():
                            between = None
                    token.run_sync_soon(counted, write_batch(self._connection, rows, between))
            finally:
                if watch is not None:
                    watch.close()
                if lowered:
                    thread_priority.restore(self._writer_priority)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(trio.to_thread.run_sync, write_batches, limiter=self._limiter)
            )
            try:
                while True:
                    try:
                        first = await self._receive.receive()
                    except trio.EndOfChannel:
                        return
                    self._hold(first)
                    self._gather_queued()
                    if self._linger_s > 0 and len(self._held) < self._batch_max_rows:
                        # Wait for more rows, but never past close(): shutdown must not wait out
                        # a linger.
                        with trio.move_on_after(self._linger_s):
                            await self._closed.wait()
                    await in_flight.acquire()
                    self._gather_queued()  # what arrived while the writer was busy
                    # No checkpoint between handing the batch over and forgetting it.
                    jobs.put(self._with_owed(self._held))
                    self._held = []
            finally:
                jobs.put(None)  # the writer thread ends once the batches before it are written

    async def drain(self) -> None:
        """Write what is held and what is queued now, without waiting for more.

        Cancellation: a batch already in the worker thread completes (``abandon_on_cancel`` is
        False); batches not yet started stay held, for :meth:`discard_remaining` to count.
        """
        while True:
            await self._write_held()
            self._gather_queued()
            if not self._held:
                return

    def discard_remaining(self) -> None:
        """Count every row still held or queued as failed, then close the receive side.

        Order rows are each logged at ERROR with the row: they are the audit trail.
        """
        leftover = self._held
        self._held = []
        while True:
            try:
                leftover.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        # Closing discards the buffer, so it is counted here; later record() calls count as
        # dropped_ring_full (BrokenResourceError).
        self._receive.close()
        unwritten = heartbeats = 0
        for row in leftover:
            if isinstance(row, LatencyRow):
                unwritten += 1
            elif isinstance(row, HeartbeatRow):
                heartbeats += 1
            else:
                self._counters.order_rows_dropped += 1
                logger.error(
                    "order row not written before shutdown deadline",
                    path=str(self._path),
                    row=row_fields(row),
                )
        if self.trail.owed:
            logger.error(
                "order rows still owed to the audit trail at exit: the intent journal keeps them"
                " for the next start",
                path=str(self._path),
                rows=self.trail.owed,
            )
        if heartbeats:
            logger.warning(
                "heartbeat rows not written before shutdown deadline",
                path=str(self._path),
                rows=heartbeats,
            )
        if unwritten:
            self._counters.dropped_write_failed += unwritten
            logger.warning(
                "telemetry rows not written before shutdown deadline",
                path=str(self._path),
                rows=unwritten,
            )

    async def close_database(self, timeout_s: float) -> None:
        """Close the connection in the worker thread (shielded, bounded), then report held drops."""
        with trio.move_on_after(timeout_s, shield=True):
            await trio.to_thread.run_sync(
                close_database, self._connection, self._path, limiter=self._limiter
            )
        # A no-op when the worker closed it; closes it here if the deadline struck first.
        close_database(self._connection, self._path)
        self._warnings.flush()
        self._order_failures.flush()

    def _hold(self, row: TelemetryRow) -> None:
        # Only latency rows obey the id limit: an order row is the audit trail and lands whole.
        if type(row) is LatencyRow and _is_oversized(row.correlation_id):
            self._counters.dropped_oversized_id += 1
        else:
            self._held.append(row)
            if self._observe is not None:
                self._observe(row)  # e.g. the metrics endpoint: here, not on the hot path

    def _gather_queued(self) -> None:
        """Add rows already queued to the held batch, up to the batch size, without waiting."""
        while len(self._held) < self._batch_max_rows:
            try:
                row = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
            self._hold(row)

    def _with_owed(self, rows: list[TelemetryRow]) -> list[TelemetryRow]:
        """``rows`` behind the rows owed to the audit trail (oldest first, so order holds)."""
        owed = self.trail.take_owed()
        return rows if not owed else [*owed, *rows]

    async def _write_held(self) -> None:
        if not self._held:
            return
        self._held = self._with_owed(self._held)
        outcome = await trio.to_thread.run_sync(
            write_batch, self._connection, self._held, limiter=self._limiter
        )
        # No checkpoint from here on: the outcome is counted before any cancellation can land.
        self._held = []
        self._count(outcome)

    def _count(self, outcome: BatchOutcome) -> None:
        """Turn one batch's outcome into counters and (rate-limited) log lines."""
        counters = self._counters
        counters.rows_written += outcome.rows_written
        counters.dropped_write_failed += len(outcome.failures)
        counters.order_rows_written += outcome.order_rows_written
        if outcome.committed_as_batch:
            counters.batches_committed += 1
        for correlation_id, error in outcome.failures:
            self._warnings.row_dropped(correlation_id, error)
        for heartbeat_row, error in outcome.heartbeat_failures:
            self._order_failures.heartbeat_dropped(heartbeat_row, error)
        # Order rows: the trail settles the journal, owes what may yet be written, and judges
        # whether it is available; what it drops for good is logged here.
        for order_row, error in self.trail.account(outcome):
            self._order_failures.order_dropped(order_row, error)


__all__ = [
    "BATCHES_IN_FLIGHT",
    "BATCH_LINGER_S",
    "BATCH_MAX_ROWS",
    "MAX_CORRELATION_ID_BYTES",
    "TelemetryConsumer",
]
