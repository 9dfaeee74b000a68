"""The order groups this installation created, kept in the telemetry file (ours, not the
reference's: a table of its own, which the reference's schema never reads).

An executor creates its order group at start-up and records it here, committed, before any
order can go into it, so that ``executor killswitch engage`` run alone (the executor SIGKILLed,
the host lost) can read which group to trigger. One row per group, the newest per exchange base
URL being the one in use. Its ``pid`` and the ``heartbeats`` rows' name the processes that
claim to be the file's executor (:func:`executor_pids`): ``executor group reset`` checks each
before it signals one (``executor.exchange.book.offline_reset``), since a pid read from a file
may be stale. Blocking: run these in a worker thread.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from executor.recording.database import close_database, open_database, rollback_quietly
from executor.recording.heartbeat import HEARTBEAT_PROCESS

CREATE_ORDER_GROUPS: Final = """CREATE TABLE IF NOT EXISTS order_groups (
    order_group_id   TEXT    PRIMARY KEY,
    base_url         TEXT    NOT NULL,
    contracts_limit  INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    pid              INTEGER NOT NULL
)"""


@dataclass(frozen=True, slots=True)
class RecordedGroup:
    """One ``order_groups`` row."""

    order_group_id: str
    base_url: str
    contracts_limit: int
    created_at_ms: int
    pid: int


def record_order_group(db_path: Path, group: RecordedGroup) -> None:
    """Commit ``group`` (blocking; a connection of its own, for this one transaction).

    Raises:
        TelemetryOpenError: the file cannot be opened. sqlite3.Error: the write failed.
    """
    connection, _ = open_database(db_path)
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(CREATE_ORDER_GROUPS)
            connection.execute(
                "INSERT OR REPLACE INTO order_groups"
                " (order_group_id, base_url, contracts_limit, created_at_ms, pid)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    group.order_group_id,
                    group.base_url,
                    group.contracts_limit,
                    group.created_at_ms,
                    group.pid,
                ),
            )
            connection.execute("COMMIT")
        except BaseException:
            rollback_quietly(connection)
            raise
    finally:
        close_database(connection, db_path)


def latest_order_group(db_path: Path, base_url: str) -> RecordedGroup | None:
    """The newest group recorded for ``base_url``, or None (no file, no table, no row).

    Raises:
        sqlite3.Error: the file exists but cannot be read.
    """
    if not db_path.exists():
        return None
    uri = f"{db_path.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        (has_table,) = connection.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'order_groups'"
        ).fetchone()
        if not has_table:
            return None
        found = connection.execute(
            "SELECT order_group_id, base_url, contracts_limit, created_at_ms, pid"
            " FROM order_groups WHERE base_url = ? ORDER BY created_at_ms DESC, rowid DESC"
            " LIMIT 1",
            (base_url,),
        ).fetchone()
    return None if found is None else RecordedGroup(*found)


CLAIMS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    (
        "heartbeats",
        "SELECT pid FROM heartbeats WHERE process = ? OR process LIKE ? ORDER BY beat_at_ms DESC",
        (HEARTBEAT_PROCESS, f"{HEARTBEAT_PROCESS}:%"),  # an executor's rows, not a poller's
    ),
    ("order_groups", "SELECT pid FROM order_groups ORDER BY created_at_ms DESC, rowid DESC", ()),
)
"""Each table that names an executor's pid, the query reading them newest first, its values."""


def executor_pids(db_path: Path) -> list[int]:
    """The pids ``db_path`` names as its executors, newest first, each once (none: no file).

    Raises:
        sqlite3.Error: the file exists but cannot be read.
    """
    if not db_path.exists():
        return []
    uri = f"{db_path.resolve().as_uri()}?mode=ro"
    pids: dict[int, None] = {}  # ordered, each once
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        tables = {
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        for table, sql, arguments in CLAIMS:
            if table not in tables:
                continue
            for (pid,) in connection.execute(sql, arguments):
                pids.setdefault(int(pid), None)
    return list(pids)


__all__ = [
    "CREATE_ORDER_GROUPS",
    "RecordedGroup",
    "executor_pids",
    "latest_order_group",
    "record_order_group",
]
