"""The order groups an installation created, kept in the telemetry file for a kill run alone."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from executor.recording.database import close_database, open_database
from executor.recording.orders.groups import RecordedGroup, latest_order_group, record_order_group

URL = "https://external-api.demo.kalshi.co"


def test_the_newest_group_of_the_exchange_is_the_one_found(tmp_path: Path) -> None:
    """Two runs against one exchange and one against another: the newest of that exchange."""
    db = tmp_path / "t.db"
    record_order_group(db, RecordedGroup("old", URL, 50, 1_000, 11))
    record_order_group(db, RecordedGroup("new", URL, 50, 2_000, 12))
    record_order_group(db, RecordedGroup("other", "https://127.0.0.1:1", 5, 3_000, 13))
    assert latest_order_group(db, URL) == RecordedGroup("new", URL, 50, 2_000, 12)
    assert latest_order_group(db, "https://nowhere") is None


def test_no_file_or_no_table_is_no_group(tmp_path: Path) -> None:
    """A missing file, or an executor's file from before groups, has none (and is not created)."""
    assert latest_order_group(tmp_path / "missing.db", URL) is None
    assert not (tmp_path / "missing.db").exists()
    connection, _ = open_database(tmp_path / "t.db")
    close_database(connection, tmp_path / "t.db")
    assert latest_order_group(tmp_path / "t.db", URL) is None


def test_the_row_is_committed_before_the_call_returns(tmp_path: Path) -> None:
    """Another connection sees the row at once: a SIGKILL right after start-up loses nothing."""
    db = tmp_path / "t.db"
    record_order_group(db, RecordedGroup("g", URL, 7, 5, 1))
    with contextlib.closing(sqlite3.connect(db)) as reader, reader:
        rows = reader.execute("SELECT order_group_id, contracts_limit FROM order_groups").fetchall()
    assert rows == [("g", 7)]
