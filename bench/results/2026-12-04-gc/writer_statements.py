"""Scratch: the telemetry writer's CPU per latency row (its thread's CPU time) for a run of rows
written as the JSON statements that ship, as the multi-row INSERTs of before (``chunked-rows``),
as JSON with the ``->>`` operator, and as one flat JSON array grouped by row; 500-row batches in
one thread, nothing else running. Run from the repository root with PYTHONPATH=. :

  writer_statements.py json chunked arrow grouped [...]
"""

import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from executor.recording import sqlite_writer
from executor.recording.database import open_database
from executor.recording.rows import LatencyRow, wake_recv_row

BATCH = 500
BATCHES = 120
EVENT_COLUMNS = "(correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)"
ARROW_EVENTS = (
    f"INSERT INTO latency_events {EVENT_COLUMNS}"
    " SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each(?)"
)
ARROW_CORRELATIONS = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms)"
    " SELECT value->>0, ? FROM json_each(?)"
)
GROUPED_EVENTS = (
    f"INSERT INTO latency_events {EVENT_COLUMNS} SELECT "
    + ", ".join(f"max(CASE key % 6 WHEN {column} THEN value END)" for column in range(6))
    + " FROM json_each(?) GROUP BY key / 6 ORDER BY key / 6"
)


def make_rows(count: int, first: int) -> list[LatencyRow]:
    return [
        wake_recv_row(
            f"corr-{first + i:08d}-abcdef", 1_787_000_000_000, 1_787_000_000_001, 12_345, True
        )
        for i in range(count)
    ]


def json(connection: sqlite3.Connection, rows: list[LatencyRow]) -> None:
    sqlite_writer._insert_rows(connection, rows, 1)


def chunked(connection: sqlite3.Connection, rows: list[LatencyRow]) -> None:
    start = 0
    for size in (128, 64, 32, 16, 8, 4, 2, 1):
        while len(rows) - start >= size:
            chunk = rows[start : start + size]
            correlations = sqlite_writer._INSERT_CORRELATION + ", (?, ?)" * (size - 1)
            events = f"INSERT INTO latency_events {EVENT_COLUMNS} VALUES " + ", ".join(
                ["(?, ?, ?, ?, ?, ?)"] * size
            )
            connection.execute(correlations, [v for row in chunk for v in (row[0], 1)])
            connection.execute(events, [value for row in chunk for value in row])
            start += size


def arrow(connection: sqlite3.Connection, rows: list[LatencyRow]) -> None:
    text = sqlite_writer._rows_json(rows)
    connection.execute(ARROW_CORRELATIONS, (1, text))
    connection.execute(ARROW_EVENTS, (text,))


def grouped(connection: sqlite3.Connection, rows: list[LatencyRow]) -> None:
    connection.execute(sqlite_writer._JSON_CORRELATIONS, (1, sqlite_writer._rows_json(rows)))
    flat = orjson.dumps([value for row in rows for value in row]).decode()
    connection.execute(GROUPED_EVENTS, (flat,))


WAYS: dict[str, Callable[[sqlite3.Connection, list[LatencyRow]], None]] = {
    "json": json,
    "chunked": chunked,
    "arrow": arrow,
    "grouped": grouped,
}

for name in sys.argv[1:]:
    write = WAYS[name]
    connection, _ = open_database(Path(tempfile.mkdtemp()) / "t.db")
    first = 0
    spent_ns = 0
    for batch in range(5 + BATCHES):
        rows = make_rows(BATCH, first)
        first += BATCH
        started = time.thread_time_ns()
        connection.execute("BEGIN")
        write(connection, rows)
        connection.execute("COMMIT")
        if batch >= 5:  # the first five warm the statement cache
            spent_ns += time.thread_time_ns() - started
    print(f"{name:8} {spent_ns / (BATCHES * BATCH) / 1000:.2f} us/row", flush=True)
