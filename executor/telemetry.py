"""Telemetry: latency rows into SQLite, never in the way of the hot path.

Producers (connection tasks) hand a :class:`LatencyRow` to :meth:`Telemetry.record`, which does one
``send_nowait`` into a bounded Trio memory channel and returns; a full (or closed) channel drops the
row and counts it. One consumer task, :func:`serve_telemetry`, receives a row, gathers whatever else
is already queued (up to ``BATCH_MAX_ROWS``), waits up to ``BATCH_LINGER_S`` for more while the
batch is not full (never past :meth:`Telemetry.close`), and commits the batch as one transaction in
a worker thread. The tables and columns are the reference system's, so its benchmark query and
its poller can share the file (TELEMETRY.md).

Thread discipline: one ``sqlite3`` connection, opened with ``check_same_thread=False`` and used only
through ``trio.to_thread.run_sync(..., limiter=CapacityLimiter(1))``. Trio's thread cache gives no
thread affinity, so the connection must be allowed to move between threads; the limiter makes "one
thread at a time" a rule the code enforces rather than an accident of the consumer awaiting each
call. One long-lived owning thread would need its own request queue, lifecycle and shutdown
handshake, duplicating what ``to_thread`` already gives. Moving a connection between threads is
safe with SQLite built thread-safe (CPython's build is), provided no two threads use it at once.

A batch whose commit fails is rolled back and retried row by row; a row that still fails is
dropped, counted (``dropped_write_failed``) and reported by a rate-limited warning. Every row handed
to :meth:`Telemetry.record` ends up in exactly one counter: ``rows_written``,
``dropped_ring_full``, ``dropped_oversized_id`` or ``dropped_write_failed``.

The same channel carries the ``orders_fired`` audit rows and heartbeats (DISPATCH.md §8). A
pending order row is droppable (:meth:`Telemetry.record_pending`: its resolution recreates it);
resolutions and rejections are not (:meth:`Telemetry.record_order` waits for room, bounded, from a
fire task, never from the connection loop). Order rows are counted apart, in ``order_rows_written``
and ``order_rows_dropped``, and every dropped one is logged with the row, so the latency identity
above is untouched. Heartbeats are counted in neither family.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import structlog
import trio

from executor.recording.rows import (
    HeartbeatRow,
    LatencyRow,
    OrderRow,
    Stage,
    TelemetryRow,
    latency_row,
    wake_recv_row,
)
from executor.recording.sqlite_writer import (
    REFERENCE_USER_VERSION,
    TelemetryOpenError,
    close_database,
    open_database,
    write_batch,
)

CHANNEL_CAPACITY: Final = 8192
"""Rows the channel holds (rows). Several seconds of wakes at any plausible rate, while a commit of
500 rows takes milliseconds; a guess sized so a slow disk sheds rows rather than memory."""

BATCH_MAX_ROWS: Final = 500
"""Most rows committed in one transaction (rows). Large enough to amortise the commit's fsync,
small enough that one batch is a few milliseconds of worker time."""

BATCH_LINGER_S: Final = 0.010
"""How long the consumer waits for more rows when a batch is not full yet (seconds). Committing
each row the moment it arrives costs the event loop a worker-thread round trip per wake, right
when the next wake may be arriving; waiting 10 ms caps commits at ~100/s. Measured in
docs/RESULTS.md (``--telemetry-linger 0`` restores commit-at-once). Rows land <= 10 ms later."""

DRAIN_TIMEOUT_S: Final = 10.0
"""How long a cancelled consumer may keep writing what it holds (seconds). Covers one full
``busy_timeout`` wait (5 s) plus a full channel's worth of batches; a guess, not a measurement."""

CLOSE_TIMEOUT_S: Final = 5.0
"""How long closing the database may take in the worker (seconds): the final WAL checkpoint of a
few MiB; past it the connection is closed on the Trio thread instead. A guess."""

ORDER_ROW_TIMEOUT_S: Final = 2.0
"""How long :meth:`Telemetry.record_order` waits for room in the channel (seconds): DISPATCH.md
§4's bound for a fire task waiting to queue its resolution."""

WARNING_INTERVAL_S: Final = 10.0
"""At most one write-failure warning per this many seconds; a broken disk must not flood the log."""

MAX_CORRELATION_ID_BYTES: Final = 128
"""Longest correlation_id written (UTF-8 bytes); longer ids are dropped, never truncated."""

_MAX_BYTES_PER_CHAR: Final = 4
"""UTF-8 encodes a code point in at most 4 bytes, so short ids need no encoding to be checked."""

logger = structlog.get_logger()


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


@dataclass(slots=True)
class _Counters:
    """The live counters, mutated only from the Trio thread."""

    rows_written: int = 0
    dropped_ring_full: int = 0
    dropped_oversized_id: int = 0
    dropped_write_failed: int = 0
    batches_committed: int = 0
    order_rows_written: int = 0
    order_rows_dropped: int = 0


class Telemetry:
    """The producer side of the telemetry channel, handed to the server."""

    __slots__ = ("_closed", "_counters", "_send")

    def __init__(
        self, send: trio.MemorySendChannel[TelemetryRow], counters: _Counters, closed: trio.Event
    ) -> None:
        self._send = send
        self._counters = counters
        self._closed = closed

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

    def statistics(self) -> TelemetryStatistics:
        """The counters now, and how many rows wait in the channel."""
        counters = self._counters
        return TelemetryStatistics(
            rows_written=counters.rows_written,
            dropped_ring_full=counters.dropped_ring_full,
            dropped_oversized_id=counters.dropped_oversized_id,
            dropped_write_failed=counters.dropped_write_failed,
            queued=self._send.statistics().current_buffer_used,
            batches_committed=counters.batches_committed,
            order_rows_written=counters.order_rows_written,
            order_rows_dropped=counters.order_rows_dropped,
        )


def row_fields(row: OrderRow) -> dict[str, Any]:
    """The order row as a plain dict for a log line (the kind and status as their values)."""
    fields = asdict(row)
    fields["kind"] = row.kind.value
    fields["status"] = str(row.status)
    return fields


def _is_oversized(correlation_id: str) -> bool:
    """True when the id's UTF-8 form exceeds ``MAX_CORRELATION_ID_BYTES``."""
    if len(correlation_id) * _MAX_BYTES_PER_CHAR <= MAX_CORRELATION_ID_BYTES:
        return False
    # surrogatepass: an unencodable id is the writer's problem (counted there), not a crash here.
    encoded = correlation_id.encode("utf-8", "surrogatepass")
    return len(encoded) > MAX_CORRELATION_ID_BYTES


# --- the Trio side --------------------------------------------------------------------------------


class _Throttle:
    """At most one line per ``WARNING_INTERVAL_S``; the occurrences held back in between are
    counted and handed to the next line (a broken disk must not flood the log)."""

    def __init__(self) -> None:
        self._next_allowed = float("-inf")
        self._suppressed = 0

    def admit(self) -> int | None:
        """The count held back since the last line when one may be logged now, else None."""
        now = time.monotonic()
        if now < self._next_allowed:
            self._suppressed += 1
            return None
        self._next_allowed = now + WARNING_INTERVAL_S
        return self.take_suppressed()

    def take_suppressed(self) -> int:
        """The count held back so far, which is reset."""
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed


class _FailureWarnings:
    """Throttled warnings for latency rows the database refused."""

    def __init__(self, path: Path) -> None:
        self._path = str(path)
        self._throttle = _Throttle()

    def row_dropped(self, correlation_id: str, error: str) -> None:
        """Report one dropped row, or count it towards the next report."""
        suppressed = self._throttle.admit()
        if suppressed is not None:
            logger.warning(
                "telemetry row dropped: write failed",
                path=self._path,
                correlation_id=correlation_id,
                error=error,
                suppressed=suppressed,
            )

    def flush(self) -> None:
        """Report the drops held back since the last warning, if any."""
        suppressed = self._throttle.take_suppressed()
        if suppressed:
            logger.warning(
                "telemetry rows dropped: write failed", path=self._path, suppressed=suppressed
            )


class _OrderFailureLog:
    """Throttled ERROR lines, with the row, for order rows the database refused; throttled
    warnings for heartbeats."""

    def __init__(self, path: Path) -> None:
        self._path = str(path)
        self._orders = _Throttle()
        self._heartbeats = _Throttle()

    def order_dropped(self, row: OrderRow, error: str) -> None:
        """Report one dropped order row with its content, or count it towards the next report."""
        suppressed = self._orders.admit()
        if suppressed is not None:
            logger.error(
                "order row dropped: write failed",
                path=self._path,
                row=row_fields(row),
                error=error,
                suppressed=suppressed,
            )

    def heartbeat_dropped(self, row: HeartbeatRow, error: str) -> None:
        """One warning per interval for heartbeats that could not be written."""
        if self._heartbeats.admit() is not None:
            logger.warning(
                "heartbeat row dropped: write failed", path=self._path, row=asdict(row), error=error
            )

    def flush(self) -> None:
        """Report the order drops held back since the last line, if any."""
        suppressed = self._orders.take_suppressed()
        if suppressed:
            logger.error("order rows dropped: write failed", path=self._path, suppressed=suppressed)


class _Consumer:
    """Receives rows, batches them and writes each batch in the worker thread."""

    def __init__(
        self,
        receive: trio.MemoryReceiveChannel[TelemetryRow],
        connection: sqlite3.Connection,
        path: Path,
        counters: _Counters,
        batch_max_rows: int,
        limiter: trio.CapacityLimiter,
        linger_s: float = BATCH_LINGER_S,
        closed: trio.Event | None = None,
        observe: Callable[[LatencyRow], None] | None = None,
    ) -> None:
        self._receive = receive
        self._connection = connection
        self._path = path
        self._counters = counters
        self._batch_max_rows = batch_max_rows
        self._limiter = limiter
        self._linger_s = linger_s
        self._closed = closed if closed is not None else trio.Event()
        self._warnings = _FailureWarnings(path)
        self._order_failures = _OrderFailureLog(path)
        self._observe = observe
        self._held: list[TelemetryRow] = []
        """The batch being gathered or written; cleared only once its outcome is counted."""

    async def run(self) -> None:
        """Write batches until the channel is closed and empty."""
        while True:
            try:
                first = await self._receive.receive()
            except trio.EndOfChannel:
                return
            self._hold(first)
            self._gather_queued()
            if self._linger_s > 0 and len(self._held) < self._batch_max_rows:
                # Wait for more rows, but never past close(): shutdown must not wait out a linger.
                with trio.move_on_after(self._linger_s):
                    await self._closed.wait()
                self._gather_queued()
            await self._write_held()

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
            if self._observe is not None and type(row) is LatencyRow:
                self._observe(row)  # e.g. the metrics histograms: here, not on the hot path

    def _gather_queued(self) -> None:
        """Add rows already queued to the held batch, up to the batch size, without waiting."""
        while len(self._held) < self._batch_max_rows:
            try:
                row = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                return
            self._hold(row)

    async def _write_held(self) -> None:
        if not self._held:
            return
        outcome = await trio.to_thread.run_sync(
            write_batch, self._connection, self._held, limiter=self._limiter
        )
        # No checkpoint from here on: the outcome is counted before any cancellation can land.
        self._held = []
        counters = self._counters
        counters.rows_written += outcome.rows_written
        counters.dropped_write_failed += len(outcome.failures)
        counters.order_rows_written += outcome.order_rows_written
        counters.order_rows_dropped += len(outcome.order_failures)
        if outcome.committed_as_batch:
            counters.batches_committed += 1
        for correlation_id, error in outcome.failures:
            self._warnings.row_dropped(correlation_id, error)
        for order_row, error in outcome.order_failures:
            self._order_failures.order_dropped(order_row, error)
        for heartbeat_row, error in outcome.heartbeat_failures:
            self._order_failures.heartbeat_dropped(heartbeat_row, error)


async def serve_telemetry(
    db_path: os.PathLike[str] | str,
    *,
    capacity: int = CHANNEL_CAPACITY,
    batch_max_rows: int = BATCH_MAX_ROWS,
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    linger_s: float = BATCH_LINGER_S,
    observe: Callable[[LatencyRow], None] | None = None,
    task_status: trio.TaskStatus[Telemetry] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open the database, hand back a :class:`Telemetry`, and write rows until it is closed.

    Meant for ``telemetry = await nursery.start(serve_telemetry, path)``: the database is open and
    its schema in place before ``start`` returns. Returns once :meth:`Telemetry.close` has been
    called and every queued row is committed and the database closed. ``observe``, when given, is
    called with each row the consumer takes off the channel (on the Trio thread, off the hot path).

    Raises:
        TelemetryOpenError: before ``started``, when the database cannot be opened or initialised.

    Cancellation: the rows held and queued are still written, shielded, for at most
    ``drain_timeout_s`` (a batch already in the worker thread always completes); rows not written
    by then are counted as ``dropped_write_failed``. Rows recorded after that are counted as
    ``dropped_ring_full``.
    """
    path = Path(db_path)
    one_thread_at_a_time = trio.CapacityLimiter(1)
    connection, created = await trio.to_thread.run_sync(
        open_database, path, limiter=one_thread_at_a_time
    )
    counters = _Counters()
    send, receive = trio.open_memory_channel[TelemetryRow](capacity)
    closed = trio.Event()
    consumer = _Consumer(
        receive,
        connection,
        path,
        counters,
        batch_max_rows,
        one_thread_at_a_time,
        linger_s,
        closed,
        observe,
    )
    try:
        logger.info("telemetry database open", path=str(path), created=created)
        task_status.started(Telemetry(send, counters, closed))
        await consumer.run()
    finally:
        with trio.move_on_after(drain_timeout_s, shield=True):
            await consumer.drain()
        consumer.discard_remaining()
        await consumer.close_database(CLOSE_TIMEOUT_S)


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
