"""The baseline executor's telemetry: a bounded queue drained by one thread into ``latency_events``.

The shape is the reference's: the event loop hands a finished row to a ``queue.Queue`` without
waiting (a full queue drops and counts the row), and one writer thread owns the SQLite connection
and commits whatever is queued in batches. The schema is the reference's two tables, created here
with the exact definitions TELEMETRY.md gives, so the harness reads every executor the same way.
"""

from __future__ import annotations

import dataclasses
import queue
import sqlite3
import threading
import time
from typing import Final

QUEUE_CAPACITY: Final = 8192
"""Rows held while the writer commits (rows); the same capacity as the Trio executor's channel."""

BATCH_ROWS: Final = 500
"""Most rows committed in one transaction; the reference and the C++ port both use 500."""

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS correlations (
    correlation_id  TEXT    PRIMARY KEY,
    created_at_ms   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS latency_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    correlation_id  TEXT    NOT NULL REFERENCES correlations (correlation_id),
    stage           TEXT    NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL,
    duration_ms     REAL    NOT NULL,
    metadata_json   TEXT,
    created_at_ms   INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000)
);
CREATE INDEX IF NOT EXISTS idx_latency_events_stage ON latency_events (stage);
CREATE INDEX IF NOT EXISTS idx_latency_events_correlation_id ON latency_events (correlation_id);
CREATE INDEX IF NOT EXISTS idx_latency_events_started_at ON latency_events (started_at_ms);
"""

_INSERT_CORRELATION: Final = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms) VALUES (?, ?)"
)
_INSERT_EVENT: Final = (
    "INSERT INTO latency_events (correlation_id, stage, started_at_ms, ended_at_ms, duration_ms,"
    " metadata_json) VALUES (?, ?, ?, ?, ?, ?)"
)

Row = tuple[str, str, int, int, float, str]
"""(correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)."""


def open_database(path: str) -> sqlite3.Connection:
    """Open (creating if needed) a telemetry file with the reference's pragmas and two tables."""
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA busy_timeout = 5000")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("PRAGMA foreign_keys = ON")
    fresh = (
        connection.execute("PRAGMA user_version").fetchone()[0] == 0
        and not (connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    )
    connection.executescript(SCHEMA)
    if fresh:
        connection.execute("PRAGMA user_version = 6")
    connection.commit()
    return connection


@dataclasses.dataclass
class WriterCounters:
    """What happened to every row handed to the writer."""

    rows_written: int = 0
    dropped_ring_full: int = 0
    dropped_write_failed: int = 0


class RowWriter:
    """One thread that owns the connection and commits queued rows in batches.

    ``record`` never blocks; ``close`` lets the thread drain everything queued, then joins it.
    """

    def __init__(self, path: str, capacity: int = QUEUE_CAPACITY) -> None:
        self.counters = WriterCounters()
        self._queue: queue.Queue[Row | None] = queue.Queue(maxsize=capacity)
        self._connection = open_database(path)
        self._thread = threading.Thread(target=self._run, name="telemetry-writer", daemon=True)
        self._thread.start()

    def record(self, row: Row) -> None:
        """Hand one row to the writer; a full queue drops it and counts the drop."""
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            self.counters.dropped_ring_full += 1

    def close(self) -> None:
        """Write every row still queued, commit, close the database and join the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        finished = False
        while not finished:
            first = self._queue.get()
            batch: list[Row] = []
            if first is None:
                finished = True
            else:
                batch.append(first)
            while not finished and len(batch) < BATCH_ROWS:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    finished = True
                else:
                    batch.append(item)
            if batch:
                self._commit(batch)
        self._connection.close()

    def _commit(self, batch: list[Row]) -> None:
        now_ms = time.time_ns() // 1_000_000
        try:
            with self._connection:
                self._connection.executemany(
                    _INSERT_CORRELATION, [(row[0], now_ms) for row in batch]
                )
                self._connection.executemany(_INSERT_EVENT, batch)
            self.counters.rows_written += len(batch)
        except sqlite3.Error:
            self.counters.dropped_write_failed += len(batch)
