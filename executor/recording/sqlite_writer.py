"""The SQLite side of telemetry: the functions the worker thread runs.

Everything here is blocking and runs only in the telemetry worker thread (the consumer in
``executor.recording.consumer`` owns the thread discipline): open and initialise the file with
the schema of ``executor.recording.schema``, commit a batch (falling back to one row at a time),
close.

A batch mixes row types and is written in arrival order in one transaction: runs of latency rows
go through the multi-row INSERTs (they are nearly every row), order and heartbeat rows (a few per
fire, one per 10 s) one statement each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, cast

import structlog

from executor.clock import wall_ms
from executor.recording.rows import HeartbeatRow, LatencyRow, OrderRow, OrderRowKind, TelemetryRow
from executor.recording.schema import REFERENCE_USER_VERSION, SCHEMA_STATEMENTS

BUSY_TIMEOUT_MS: Final = 5000
"""SQLite waits this long (ms) for another writer's lock (the reference poller shares the file)."""

ROW_RETRY_BUDGET_S: Final = 10.0
"""Longest a failed batch's row-by-row retry may run (seconds). A locked database makes every row
wait ``busy_timeout``; past the budget the remaining rows are counted as failed, not tried."""

# Constant strings, so sqlite3's statement cache parses each once for the connection's life.
_INSERT_CORRELATION: Final = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms) VALUES (?, ?)"
)
_INSERT_LATENCY_EVENT: Final = (
    "INSERT INTO latency_events"
    " (correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)

_ORDER_COLUMNS: Final = (
    "correlation_id",
    "client_order_id",
    "kalshi_order_id",
    "ticker",
    "correlation_group",
    "outcome_side",
    "count",
    "price_dollars",
    "time_in_force",
    "self_trade_prevention_type",
    "post_only",
    "status",
    "error_message",
    "fill_count",
    "remaining_count",
    "average_fill_price",
    "average_fee_paid",
    "requested_at_ms",
    "submitted_at_ms",
    "acknowledged_at_ms",
)
"""The ``orders_fired`` columns an order row writes (``id`` and ``created_at_ms`` are defaults)."""

_INSERT_ORDER: Final = (
    f"INSERT INTO orders_fired ({', '.join(_ORDER_COLUMNS)})"
    f" VALUES ({', '.join('?' for _ in _ORDER_COLUMNS)})"
)
# A resolution replaces everything but its key and the time the request was first made, so it
# lands whole when its pending row never did, and keeps the pending's requested_at_ms when it did.
_UPSERT_ORDER: Final = (
    _INSERT_ORDER
    + " ON CONFLICT (client_order_id) DO UPDATE SET "
    + ", ".join(
        f"{column} = excluded.{column}"
        for column in _ORDER_COLUMNS
        if column not in ("client_order_id", "requested_at_ms")
    )
)
_REPLACE_HEARTBEAT: Final = (
    "INSERT OR REPLACE INTO heartbeats"
    " (process, pid, started_at_ms, beat_at_ms, queue_depth, dropped_rows)"
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


def _order_values(row: OrderRow) -> tuple[object, ...]:
    """The row's values in ``_ORDER_COLUMNS`` order (the status as its plain string)."""
    return (
        row.correlation_id,
        row.client_order_id,
        row.kalshi_order_id,
        row.ticker,
        row.correlation_group,
        row.outcome_side,
        row.count,
        row.price_dollars,
        row.time_in_force,
        row.self_trade_prevention_type,
        row.post_only,
        str(row.status),
        row.error_message,
        row.fill_count,
        row.remaining_count,
        row.average_fill_price,
        row.average_fee_paid,
        row.requested_at_ms,
        row.submitted_at_ms,
        row.acknowledged_at_ms,
    )


def _write_order(connection: sqlite3.Connection, row: OrderRow, now_ms: int) -> None:
    """Insert (pending, rejected) or upsert (resolution) one order row, its parent first."""
    connection.execute(_INSERT_CORRELATION, (row.correlation_id, now_ms))
    statement = _UPSERT_ORDER if row.kind is OrderRowKind.RESOLUTION else _INSERT_ORDER
    connection.execute(statement, _order_values(row))


def _write_heartbeat(connection: sqlite3.Connection, row: HeartbeatRow) -> None:
    """Replace this process's heartbeat row."""
    connection.execute(
        _REPLACE_HEARTBEAT,
        (
            row.process,
            row.pid,
            row.started_at_ms,
            row.beat_at_ms,
            row.queue_depth,
            row.dropped_rows,
        ),
    )


def _write_mixed(
    connection: sqlite3.Connection, rows: list[TelemetryRow], now_ms: int
) -> tuple[int, int]:
    """Write ``rows`` in arrival order in the caller's transaction; return (orders, heartbeats).

    Runs of latency rows go to ``_insert_rows`` as slices (the whole list when nothing else is in
    the batch, the usual case), so the mixed batch costs the latency path one type test per row.
    """
    order_rows = heartbeat_rows = 0
    run_start = 0
    for index, row in enumerate(rows):
        if type(row) is LatencyRow:
            continue
        if run_start < index:
            _insert_rows(connection, cast("list[LatencyRow]", rows[run_start:index]), now_ms)
        if isinstance(row, OrderRow):
            _write_order(connection, row, now_ms)
            order_rows += 1
        elif isinstance(row, HeartbeatRow):
            _write_heartbeat(connection, row)
            heartbeat_rows += 1
        run_start = index + 1
    if run_start == 0:
        _insert_rows(connection, cast("list[LatencyRow]", rows), now_ms)
    elif run_start < len(rows):
        _insert_rows(connection, cast("list[LatencyRow]", rows[run_start:]), now_ms)
    return order_rows, heartbeat_rows


WRITE_ERRORS: Final = (sqlite3.Error, OSError, ValueError, OverflowError)
"""What a write may raise: SQLite and disk errors, and values sqlite3 cannot bind (a lone
surrogate, an integer beyond int64). None of them may end the consumer."""

logger = structlog.get_logger()


class TelemetryOpenError(Exception):
    """The telemetry database could not be opened or initialised (message names the path)."""


def _path_problem(path: Path) -> str | None:
    """What is wrong with ``path``'s folders, in words (mkdir's own "File exists" is not)."""
    for ancestor in path.parents:
        if ancestor.is_symlink() or ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is not a directory"
            return None
    return None


def open_database(path: Path) -> tuple[sqlite3.Connection, bool]:
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
        raise TelemetryOpenError(
            f"cannot open telemetry database {path}: {_path_problem(path) or error}"
        ) from None
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("BEGIN IMMEDIATE")
        try:
            # Under the write lock nobody else can be mid-creation; a committed database (WAL
            # or not) always has its header page in the main file, so zero bytes means new.
            created = path.stat().st_size == 0
            for statement in SCHEMA_STATEMENTS:
                connection.execute(statement)
            if created:
                connection.execute(f"PRAGMA user_version = {REFERENCE_USER_VERSION}")
            connection.execute("COMMIT")
        except BaseException:
            rollback_quietly(connection)
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


def prove_writable(connection: sqlite3.Connection, path: Path) -> None:
    """Commit one write that changes nothing (``user_version`` rewritten with its own value), so a
    database that opens but cannot be written (a read-only file, a full disk) is found now.

    Raises:
        TelemetryOpenError: the write or its commit failed.
    """
    try:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(f"PRAGMA user_version = {int(version)}")
        connection.execute("COMMIT")
    except WRITE_ERRORS as error:
        rollback_quietly(connection)
        raise TelemetryOpenError(
            f"telemetry database {path} is not writable ({error}): "
            "with an exchange the executor does not trade without its audit trail"
        ) from None


DATABASE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")
"""The files SQLite keeps for a database at ``path`` (``path`` + suffix)."""


def database_files(path: Path) -> list[Path]:
    """The database's files that exist now."""
    return [path.with_name(path.name + suffix) for suffix in DATABASE_SUFFIXES if
            path.with_name(path.name + suffix).exists()]


def remove_new_files(path: Path, existed: list[Path]) -> None:
    """After a refused start (the connection closed): remove the database files that were not in
    ``existed`` before it opened (SQLite leaves an empty ``-wal`` and a ``-shm`` beside a file it
    could not write). Blocking: call it from a worker thread."""
    for leftover in database_files(path):
        if leftover not in existed:
            with contextlib.suppress(OSError):
                leftover.unlink()


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one batch write achieved; the Trio side turns it into counters and log lines."""

    rows_written: int
    """Latency rows written."""
    committed_as_batch: bool
    failures: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """``(correlation_id, error)`` for each latency row dropped."""
    order_rows_written: int = 0
    order_failures: list[tuple[OrderRow, str]] = dataclasses.field(default_factory=list)
    """``(row, error)`` for each order row dropped (refused by a CHECK, or the disk failed)."""
    heartbeat_failures: list[tuple[HeartbeatRow, str]] = dataclasses.field(default_factory=list)
    heartbeat_rows_written: int = 0


def rollback_quietly(connection: sqlite3.Connection) -> None:
    """Roll back whatever transaction is open; a failing rollback must not hide the first error."""
    try:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
    except WRITE_ERRORS:
        pass


def write_batch(connection: sqlite3.Connection, rows: list[TelemetryRow]) -> BatchOutcome:
    """Commit ``rows`` as one transaction; on failure, roll back and retry them one by one."""
    now_ms = wall_ms()
    try:
        connection.execute("BEGIN IMMEDIATE")
        order_rows, heartbeat_rows = _write_mixed(connection, rows, now_ms)
        connection.execute("COMMIT")
    except WRITE_ERRORS:
        rollback_quietly(connection)
    else:
        return BatchOutcome(
            rows_written=len(rows) - order_rows - heartbeat_rows,
            committed_as_batch=True,
            order_rows_written=order_rows,
            heartbeat_rows_written=heartbeat_rows,
        )
    return write_rows_one_by_one(connection, rows, now_ms)


def write_rows_one_by_one(
    connection: sqlite3.Connection, rows: list[TelemetryRow], now_ms: int
) -> BatchOutcome:
    """Write each row in its own transaction, so one bad row cannot sink the others."""
    give_up_at = time.monotonic() + ROW_RETRY_BUDGET_S
    written = 0
    order_written = heartbeat_written = 0
    failures: list[tuple[str, str]] = []
    order_failures: list[tuple[OrderRow, str]] = []
    heartbeat_failures: list[tuple[HeartbeatRow, str]] = []
    for row in rows:
        if time.monotonic() > give_up_at:
            error = "row retry budget exhausted"
        else:
            try:
                connection.execute("BEGIN IMMEDIATE")
                _write_mixed(connection, [row], now_ms)
                connection.execute("COMMIT")
            except WRITE_ERRORS as failure:
                rollback_quietly(connection)
                error = f"{type(failure).__name__}: {failure}"
            else:
                if isinstance(row, LatencyRow):
                    written += 1
                elif isinstance(row, OrderRow):
                    order_written += 1
                else:
                    heartbeat_written += 1
                continue
        if isinstance(row, LatencyRow):
            failures.append((row.correlation_id, error))
        elif isinstance(row, OrderRow):
            order_failures.append((row, error))
        else:
            heartbeat_failures.append((row, error))
    return BatchOutcome(
        rows_written=written,
        committed_as_batch=False,
        failures=failures,
        order_rows_written=order_written,
        order_failures=order_failures,
        heartbeat_failures=heartbeat_failures,
        heartbeat_rows_written=heartbeat_written,
    )


def close_database(connection: sqlite3.Connection, path: Path) -> None:
    """Close the connection; an error here is logged, since every row is already committed."""
    try:
        connection.close()
    except WRITE_ERRORS as error:
        logger.warning("telemetry database close failed", path=str(path), error=str(error))
