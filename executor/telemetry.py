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
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

import structlog
import trio

from executor.clock import wall_ms

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

ROW_RETRY_BUDGET_S: Final = 10.0
"""Longest a failed batch's row-by-row retry may run (seconds). A locked database makes every row
wait ``busy_timeout``; past the budget the remaining rows are counted as failed, not tried."""

WARNING_INTERVAL_S: Final = 10.0
"""At most one write-failure warning per this many seconds; a broken disk must not flood the log."""

BUSY_TIMEOUT_MS: Final = 5000
"""SQLite waits this long (ms) for another writer's lock (the reference poller shares the file)."""

MAX_CORRELATION_ID_BYTES: Final = 128
"""Longest correlation_id written (UTF-8 bytes); longer ids are dropped, never truncated."""

REFERENCE_USER_VERSION: Final = 6
"""``user_version`` stamped on a file this process created: the reference's current schema, so its
migrations do not run against a file lacking their tables."""

_MAX_BYTES_PER_CHAR: Final = 4
"""UTF-8 encodes a code point in at most 4 bytes, so short ids need no encoding to be checked."""

_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS correlations (
    correlation_id  TEXT    PRIMARY KEY,
    created_at_ms   INTEGER NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS latency_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    correlation_id  TEXT    NOT NULL REFERENCES correlations (correlation_id),
    stage           TEXT    NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL,
    duration_ms     REAL    NOT NULL,
    metadata_json   TEXT,
    created_at_ms   INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000)
)""",
    "CREATE INDEX IF NOT EXISTS idx_latency_events_stage ON latency_events (stage)",
    "CREATE INDEX IF NOT EXISTS idx_latency_events_correlation_id"
    " ON latency_events (correlation_id)",
    "CREATE INDEX IF NOT EXISTS idx_latency_events_started_at ON latency_events (started_at_ms)",
)

# Constant strings, so sqlite3's statement cache parses each once for the connection's life.
_INSERT_CORRELATION: Final = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms) VALUES (?, ?)"
)
_INSERT_LATENCY_EVENT: Final = (
    "INSERT INTO latency_events"
    " (correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)

CHUNK_ROWS: Final = (128, 64, 32, 16, 8, 4, 2, 1)
"""Rows per multi-row INSERT (rows). A batch is written as a few statements of these sizes rather
than one statement per row: ``executemany`` gives up and retakes the GIL once per row, and with the
event loop busy each retake waits, which capped the writer near 15k rows/s under load against
~50k/s this way (measured with a GIL-hungry thread beside it; docs/RESULTS.md). 128 rows x 6
parameters stays under SQLite's historical 999-variable limit. Eight sizes means eight prepared
statements per table, each parsed once and reused from the connection's statement cache."""


@functools.cache
def _chunk_statements(rows: int) -> tuple[str, str]:
    """The correlation and latency-event INSERTs for ``rows`` rows at once."""
    return (
        _INSERT_CORRELATION + ", (?, ?)" * (rows - 1),
        _INSERT_LATENCY_EVENT + ", (?, ?, ?, ?, ?, ?)" * (rows - 1),
    )


def _insert_rows(connection: sqlite3.Connection, rows: list[LatencyRow], now_ms: int) -> None:
    """Insert ``rows`` in the caller's transaction, parents first, in ``CHUNK_ROWS`` pieces."""
    start = 0
    for size in CHUNK_ROWS:
        while len(rows) - start >= size:
            chunk = rows[start : start + size]
            correlations_sql, events_sql = _chunk_statements(size)
            connection.execute(correlations_sql, [v for row in chunk for v in (row[0], now_ms)])
            connection.execute(events_sql, [value for row in chunk for value in row])
            start += size


_WRITE_ERRORS: Final = (sqlite3.Error, OSError, ValueError, OverflowError)
"""What a write may raise: SQLite and disk errors, and values sqlite3 cannot bind (a lone
surrogate, an integer beyond int64). None of them may end the consumer."""

_DRY_RUN_FALSE_JSON: Final = '{"dry_run": false}'
_DRY_RUN_TRUE_JSON: Final = '{"dry_run": true}'

logger = structlog.get_logger()


class Stage(enum.StrEnum):
    """The reference system's stage vocabulary (``latency_events.stage``)."""

    DETECT_FIRE = "detect_fire"
    INGEST_FETCH = "ingest_fetch"
    DECISION = "decision"
    WAKE_SEND = "wake_send"
    WAKE_RECV = "wake_recv"
    ORDER_BUILD = "order_build"
    SIGN = "sign"
    DISPATCH_SEND = "dispatch_send"
    DISPATCH_ACK = "dispatch_ack"
    TELEMETRY_WRITE = "telemetry_write"


class LatencyRow(NamedTuple):
    """One ``latency_events`` row; field order is the INSERT's column order."""

    correlation_id: str
    stage: Stage
    started_at_ms: int
    ended_at_ms: int
    duration_ms: float
    metadata_json: str | None


def latency_row(
    correlation_id: str,
    stage: Stage | str,
    started_at_ms: int,
    ended_at_ms: int,
    duration_ms: float,
    metadata_json: str | None = None,
) -> LatencyRow:
    """Build a row, validating ``stage`` against the vocabulary.

    Raises:
        ValueError: ``stage`` is not one of :class:`Stage`'s values.
    """
    return LatencyRow(
        correlation_id, Stage(stage), started_at_ms, ended_at_ms, duration_ms, metadata_json
    )


def wake_recv_row(
    correlation_id: str, started_at_ms: int, ended_at_ms: int, duration_ns: int, dry_run: bool
) -> LatencyRow:
    """The ``wake_recv`` row for one acked frame; no serializer call, the metadata is prebuilt."""
    return LatencyRow(
        correlation_id,
        Stage.WAKE_RECV,
        started_at_ms,
        ended_at_ms,
        duration_ns / 1_000_000,
        _DRY_RUN_TRUE_JSON if dry_run else _DRY_RUN_FALSE_JSON,
    )


@dataclass(frozen=True, slots=True)
class TelemetryStatistics:
    """A snapshot of the telemetry counters.

    ``batches_committed`` counts batches committed as one transaction (a batch retried row by row
    does not count); ``queued`` is the rows in the channel at the time of the snapshot.
    """

    rows_written: int
    dropped_ring_full: int
    dropped_oversized_id: int
    dropped_write_failed: int
    queued: int
    batches_committed: int = 0


@dataclass(slots=True)
class _Counters:
    """The live counters, mutated only from the Trio thread."""

    rows_written: int = 0
    dropped_ring_full: int = 0
    dropped_oversized_id: int = 0
    dropped_write_failed: int = 0
    batches_committed: int = 0


class TelemetryOpenError(Exception):
    """The telemetry database could not be opened or initialised (message names the path)."""


class Telemetry:
    """The producer side of the telemetry channel, handed to the server."""

    __slots__ = ("_closed", "_counters", "_send")

    def __init__(
        self, send: trio.MemorySendChannel[LatencyRow], counters: _Counters, closed: trio.Event
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
        )


def _is_oversized(correlation_id: str) -> bool:
    """True when the id's UTF-8 form exceeds ``MAX_CORRELATION_ID_BYTES``."""
    if len(correlation_id) * _MAX_BYTES_PER_CHAR <= MAX_CORRELATION_ID_BYTES:
        return False
    # surrogatepass: an unencodable id is the writer's problem (counted there), not a crash here.
    encoded = correlation_id.encode("utf-8", "surrogatepass")
    return len(encoded) > MAX_CORRELATION_ID_BYTES


# --- the database side: these functions run in the worker thread ---------------------------------


def _open_database(path: Path) -> tuple[sqlite3.Connection, bool]:
    """Open and initialise the database; return the connection and whether this call created it.

    "Created" is decided under SQLite's write lock: a file that is empty (it was absent, or zero
    bytes) while we hold ``BEGIN IMMEDIATE`` is ours, even if another process raced us to open it.
    WAL is switched on after that first transaction, since setting it writes the file header.

    Raises:
        TelemetryOpenError: the path cannot be opened or initialised.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            # sqlite3 reports a directory as a generic "unable to open"; say what it is.
            raise TelemetryOpenError(f"telemetry database {path} is a directory")
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except TelemetryOpenError:
        raise
    except (sqlite3.Error, OSError) as error:
        raise TelemetryOpenError(f"cannot open telemetry database {path}: {error}") from error
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("BEGIN IMMEDIATE")
        try:
            # Under the write lock nobody else can be mid-creation; a committed database (WAL
            # or not) always has its header page in the main file, so zero bytes means new.
            created = path.stat().st_size == 0
            for statement in _SCHEMA:
                connection.execute(statement)
            if created:
                connection.execute(f"PRAGMA user_version = {REFERENCE_USER_VERSION}")
            connection.execute("COMMIT")
        except BaseException:
            _rollback_quietly(connection)
            raise
        (journal_mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(journal_mode).lower() != "wal":
            raise TelemetryOpenError(
                f"telemetry database {path} refused WAL mode (journal_mode={journal_mode})"
            )
    except TelemetryOpenError:
        connection.close()
        raise
    except (sqlite3.Error, OSError) as error:
        connection.close()
        raise TelemetryOpenError(f"cannot initialise telemetry database {path}: {error}") from error
    return connection, created


@dataclass(frozen=True, slots=True)
class _BatchOutcome:
    """What one batch write achieved; the Trio side turns it into counters and log lines."""

    rows_written: int
    committed_as_batch: bool
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """``(correlation_id, error)`` for each row dropped."""


def _rollback_quietly(connection: sqlite3.Connection) -> None:
    """Roll back whatever transaction is open; a failing rollback must not hide the first error."""
    try:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
    except _WRITE_ERRORS:
        pass


def _write_batch(connection: sqlite3.Connection, rows: list[LatencyRow]) -> _BatchOutcome:
    """Commit ``rows`` as one transaction; on failure, roll back and retry them one by one."""
    now_ms = wall_ms()
    try:
        connection.execute("BEGIN IMMEDIATE")
        _insert_rows(connection, rows, now_ms)
        connection.execute("COMMIT")
    except _WRITE_ERRORS:
        _rollback_quietly(connection)
    else:
        return _BatchOutcome(rows_written=len(rows), committed_as_batch=True)
    return _write_rows_one_by_one(connection, rows, now_ms)


def _write_rows_one_by_one(
    connection: sqlite3.Connection, rows: list[LatencyRow], now_ms: int
) -> _BatchOutcome:
    """Write each row in its own transaction, so one bad row cannot sink the others."""
    give_up_at = time.monotonic() + ROW_RETRY_BUDGET_S
    written = 0
    failures: list[tuple[str, str]] = []
    for row in rows:
        if time.monotonic() > give_up_at:
            failures.append((row.correlation_id, "row retry budget exhausted"))
            continue
        try:
            connection.execute("BEGIN IMMEDIATE")
            _insert_rows(connection, [row], now_ms)
            connection.execute("COMMIT")
        except _WRITE_ERRORS as error:
            _rollback_quietly(connection)
            failures.append((row.correlation_id, f"{type(error).__name__}: {error}"))
        else:
            written += 1
    return _BatchOutcome(rows_written=written, committed_as_batch=False, failures=failures)


def _close_database(connection: sqlite3.Connection, path: Path) -> None:
    """Close the connection; an error here is logged, since every row is already committed."""
    try:
        connection.close()
    except _WRITE_ERRORS as error:
        logger.warning("telemetry database close failed", path=str(path), error=str(error))


# --- the Trio side --------------------------------------------------------------------------------


class _FailureWarnings:
    """At most one warning per ``WARNING_INTERVAL_S``, carrying how many were held back."""

    def __init__(self, path: Path) -> None:
        self._path = str(path)
        self._next_allowed = float("-inf")
        self._suppressed = 0

    def row_dropped(self, correlation_id: str, error: str) -> None:
        """Report one dropped row, or count it towards the next report."""
        now = time.monotonic()
        if now < self._next_allowed:
            self._suppressed += 1
            return
        logger.warning(
            "telemetry row dropped: write failed",
            path=self._path,
            correlation_id=correlation_id,
            error=error,
            suppressed=self._suppressed,
        )
        self._suppressed = 0
        self._next_allowed = now + WARNING_INTERVAL_S

    def flush(self) -> None:
        """Report the drops held back since the last warning, if any."""
        if self._suppressed:
            logger.warning(
                "telemetry rows dropped: write failed", path=self._path, suppressed=self._suppressed
            )
            self._suppressed = 0


class _Consumer:
    """Receives rows, batches them and writes each batch in the worker thread."""

    def __init__(
        self,
        receive: trio.MemoryReceiveChannel[LatencyRow],
        connection: sqlite3.Connection,
        path: Path,
        counters: _Counters,
        batch_max_rows: int,
        limiter: trio.CapacityLimiter,
        linger_s: float = BATCH_LINGER_S,
        closed: trio.Event | None = None,
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
        self._held: list[LatencyRow] = []
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
        """Count every row still held or queued as failed, then close the receive side."""
        unwritten = len(self._held)
        self._held.clear()
        while True:
            try:
                self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            unwritten += 1
        # Closing discards the buffer, so it is counted above; later record() calls count as
        # dropped_ring_full (BrokenResourceError).
        self._receive.close()
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
                _close_database, self._connection, self._path, limiter=self._limiter
            )
        # A no-op when the worker closed it; closes it here if the deadline struck first.
        _close_database(self._connection, self._path)
        self._warnings.flush()

    def _hold(self, row: LatencyRow) -> None:
        if _is_oversized(row.correlation_id):
            self._counters.dropped_oversized_id += 1
        else:
            self._held.append(row)

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
            _write_batch, self._connection, self._held, limiter=self._limiter
        )
        # No checkpoint from here on: the outcome is counted before any cancellation can land.
        self._held = []
        counters = self._counters
        counters.rows_written += outcome.rows_written
        counters.dropped_write_failed += len(outcome.failures)
        if outcome.committed_as_batch:
            counters.batches_committed += 1
        for correlation_id, error in outcome.failures:
            self._warnings.row_dropped(correlation_id, error)


async def serve_telemetry(
    db_path: os.PathLike[str] | str,
    *,
    capacity: int = CHANNEL_CAPACITY,
    batch_max_rows: int = BATCH_MAX_ROWS,
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    linger_s: float = BATCH_LINGER_S,
    task_status: trio.TaskStatus[Telemetry] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open the database, hand back a :class:`Telemetry`, and write rows until it is closed.

    Meant for ``telemetry = await nursery.start(serve_telemetry, path)``: the database is open and
    its schema in place before ``start`` returns. Returns once :meth:`Telemetry.close` has been
    called and every queued row is committed and the database closed.

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
        _open_database, path, limiter=one_thread_at_a_time
    )
    counters = _Counters()
    send, receive = trio.open_memory_channel[LatencyRow](capacity)
    closed = trio.Event()
    consumer = _Consumer(
        receive, connection, path, counters, batch_max_rows, one_thread_at_a_time, linger_s, closed
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
