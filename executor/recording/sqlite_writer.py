"""The SQLite side of telemetry: the functions the worker thread runs.

Everything here is blocking and runs only in the telemetry worker thread (the consumer in
``executor.recording.consumer`` owns the thread discipline): commit a batch, falling back to one
row at a time. Opening, proving and closing the file is ``executor.recording.database``.

A batch mixes row types and is written in arrival order in one transaction: each run of latency
rows (nearly every row) goes in as two statements over one JSON array, so SQLite does the run's
work without the GIL; order and heartbeat rows (a few per fire, one per 10 s) one statement each.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, cast

import orjson

from executor.clock import wall_ms
from executor.recording.database import (
    WRITE_ERRORS,
    rollback_quietly,
)
from executor.recording.rows import (
    HeartbeatRow,
    LatencyRow,
    OrderRow,
    OrderRowKind,
    TelemetryRow,
    order_values,
)
from executor.recording.schema import EXECUTOR_HEARTBEATS_SCHEMA
from executor.recording.writer_yield import YIELD_SLICE_ROWS

ROW_RETRY_BUDGET_S: Final = 10.0
"""Longest a failed batch's row-by-row retry may run (seconds). A locked database makes every row
wait ``busy_timeout``; past the budget the remaining rows are counted as failed, not tried."""

# Constant strings, so sqlite3's statement cache parses each once for the connection's life.
_INSERT_CORRELATION: Final = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms) VALUES (?, ?)"
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
# A pending or adopted row goes in only when its order has no row yet: a pending row that arrives
# after its resolution (an owed row written late, a replay) must not undo it.
_INSERT_ORDER_IF_ABSENT: Final = _INSERT_ORDER + " ON CONFLICT (client_order_id) DO NOTHING"
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
_REPLACE_EXECUTOR_HEARTBEAT: Final = (
    "INSERT OR REPLACE INTO executor_heartbeats"
    " (process, pid, started_at_ms, beat_at_ms, lookups_unknown) VALUES (?, ?, ?, ?, ?)"
)

_JSON_CORRELATIONS: Final = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms)"
    " SELECT json_extract(value, '$[0]'), ? FROM json_each(?)"
)
_JSON_EVENTS: Final = (
    "INSERT INTO latency_events"
    " (correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)"
    " SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
    " json_extract(value, '$[2]'), json_extract(value, '$[3]'),"
    " json_extract(value, '$[4]'), json_extract(value, '$[5]')"
    " FROM json_each(?)"
)
"""A run of latency rows is two statements over one JSON array of the rows, whatever its length:
its parents, then its events, in array order. Binding values from Python holds the GIL for every
value, and ``sqlite3`` drops and retakes the GIL around each statement's step, a retake that waits
for a busy event loop (up to the 5 ms switch interval); here the whole run's SQLite work (parsing,
inserting, indexing) happens inside two steps without the GIL, and a batch retakes it four times
(BEGIN, two INSERTs, COMMIT) instead of about sixteen with the multi-row INSERTs of 128, 64, ...
rows this replaces. The writer thread's CPU per row is lower too (one thread, 500-row batches:
6.5-6.7 against 8.1-9.2 µs; docs/performance/notebook/ 2026-12-01). ``json_extract`` rather than
``->>``: the operator needs SQLite 3.38. ``json_each`` yields an array's elements in order, so rows
keep their arrival order without an ORDER BY (which cost ~0.8 µs a row;
tests/recording/test_json_rows.py checks the order)."""

_JSON_OPTIONS: Final = orjson.OPT_STRICT_INTEGER
"""An integer past 2**53 is refused (a ValueError: the run is retried row by row and that row
alone is dropped and counted), as binding one past int64 was: SQLite would store a JSON integer
past int64 as a rounded REAL, and checking each value in SQL cost ~3 µs a row. Every integer here
is a millisecond wall-clock stamp, near 2**41, so nothing real comes near the bound."""


def _rows_json(rows: list[LatencyRow]) -> str:
    """The rows as one JSON array of 6-element arrays, in order, as text.

    Text, not bytes: SQLite 3.45 and later read a BLOB argument of ``json_each`` as JSONB.

    Raises:
        ValueError: a row JSON cannot carry (a lone surrogate in an id, an integer past 2**53).
    """
    try:
        return orjson.dumps(rows, default=tuple, option=_JSON_OPTIONS).decode()
    except orjson.JSONEncodeError as error:
        raise ValueError(f"latency row not encodable: {error}") from None


def _insert_rows(
    connection: sqlite3.Connection,
    rows: list[LatencyRow],
    now_ms: int,
    between: Callable[[], None] | None = None,
) -> None:
    """Insert ``rows`` in the caller's transaction, parents first, as two statements; with
    ``between``, as two statements per ``YIELD_SLICE_ROWS`` rows, calling it before each pair.

    Raises:
        ValueError: a row JSON cannot carry.
    """
    if between is None:
        _insert_slice(connection, rows, now_ms)
        return
    for start in range(0, len(rows), YIELD_SLICE_ROWS):
        between()
        _insert_slice(connection, rows[start : start + YIELD_SLICE_ROWS], now_ms)


def _insert_slice(connection: sqlite3.Connection, rows: list[LatencyRow], now_ms: int) -> None:
    text = _rows_json(rows)
    connection.execute(_JSON_CORRELATIONS, (now_ms, text))
    connection.execute(_JSON_EVENTS, (text,))


def _write_order(connection: sqlite3.Connection, row: OrderRow, now_ms: int) -> None:
    """Insert (rejected), insert unless present (pending, adopted) or upsert (resolution) one
    order row, its parent first."""
    connection.execute(_INSERT_CORRELATION, (row.correlation_id, now_ms))
    kind = row.kind
    if kind is OrderRowKind.RESOLUTION:
        statement = _UPSERT_ORDER
    elif kind is OrderRowKind.REJECTED:
        statement = _INSERT_ORDER
    else:
        statement = _INSERT_ORDER_IF_ABSENT
    connection.execute(statement, order_values(row))


def _write_heartbeat(connection: sqlite3.Connection, row: HeartbeatRow) -> None:
    """Replace this process's heartbeat row, and its counters' row when it carries them (the
    table made on first use: ``EXECUTOR_HEARTBEATS_SCHEMA``)."""
    run = (row.process, row.pid, row.started_at_ms, row.beat_at_ms)
    connection.execute(_REPLACE_HEARTBEAT, (*run, row.queue_depth, row.dropped_rows))
    if row.lookups_unknown is not None:
        connection.execute(EXECUTOR_HEARTBEATS_SCHEMA)
        connection.execute(_REPLACE_EXECUTOR_HEARTBEAT, (*run, row.lookups_unknown))


def _write_mixed(
    connection: sqlite3.Connection,
    rows: list[TelemetryRow],
    now_ms: int,
    between: Callable[[], None] | None = None,
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
            _insert_rows(
                connection, cast("list[LatencyRow]", rows[run_start:index]), now_ms, between
            )
        if isinstance(row, OrderRow):
            _write_order(connection, row, now_ms)
            order_rows += 1
        elif isinstance(row, HeartbeatRow):
            _write_heartbeat(connection, row)
            heartbeat_rows += 1
        run_start = index + 1
    if run_start == 0:
        _insert_rows(connection, cast("list[LatencyRow]", rows), now_ms, between)
    elif run_start < len(rows):
        _insert_rows(connection, cast("list[LatencyRow]", rows[run_start:]), now_ms, between)
    return order_rows, heartbeat_rows


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
    order_rows_committed: list[OrderRow] = dataclasses.field(default_factory=list)
    """The order rows committed, in batch order (the intent journal settles on them)."""


def write_batch(
    connection: sqlite3.Connection,
    rows: list[TelemetryRow],
    between: Callable[[], None] | None = None,
) -> BatchOutcome:
    """Commit ``rows`` as one transaction; on failure, roll back and retry them one by one.

    With ``between`` (the writer giving way to the loop: ``executor.recording.writer_yield``), it
    is called before the transaction begins and before each slice of ``YIELD_SLICE_ROWS`` latency
    rows; the transaction, its rows and its outcome are the same. The row-by-row retry does not
    call it.
    """
    now_ms = wall_ms()
    try:
        if between is not None:
            between()
        connection.execute("BEGIN IMMEDIATE")
        order_rows, heartbeat_rows = _write_mixed(connection, rows, now_ms, between)
        connection.execute("COMMIT")
    except WRITE_ERRORS:
        rollback_quietly(connection)
    else:
        return BatchOutcome(
            rows_written=len(rows) - order_rows - heartbeat_rows,
            committed_as_batch=True,
            order_rows_written=order_rows,
            heartbeat_rows_written=heartbeat_rows,
            # Only batches that hold order rows (a few per fire) pay for this pass.
            order_rows_committed=[row for row in rows if type(row) is OrderRow]
            if order_rows
            else [],
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
    order_committed: list[OrderRow] = []
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
                    order_committed.append(row)
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
        order_rows_committed=order_committed,
    )
