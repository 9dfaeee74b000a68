"""Start-up's replay: the rows the journal knows and the database lacks are written, nothing else,
and a database that refuses them stops the start with the journal kept."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.recording.database import TelemetryOpenError, open_database, prove_writable
from executor.recording.orders.intent_journal import IntentJournal, journal_path, read_journal
from executor.recording.orders.journal_replay import replay_journal
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus, TelemetryRow
from executor.recording.sqlite_writer import write_batch
from tests.support.rows import order_row


@pytest.fixture
def db(short_dir: Path) -> Iterator[tuple[sqlite3.Connection, Path]]:
    """A fresh telemetry database and the writer's connection to it."""
    path = short_dir / "t.db"
    connection, _ = open_database(path)
    yield connection, path
    connection.close()


def journal(db_path: Path, *rows: OrderRow) -> None:
    """An earlier run's journal holding ``rows``."""
    opened = IntentJournal.open(journal_path(db_path))
    for row in rows:
        opened.append(row)
    os.close(opened._descriptor)  # as a kill leaves it: no compaction on the way out


def table(connection: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """(client_order_id, status, kalshi_order_id, requested_at_ms) of every row."""
    return connection.execute(
        "SELECT client_order_id, status, kalshi_order_id, requested_at_ms FROM orders_fired"
        " ORDER BY client_order_id"
    ).fetchall()


def resolution(row: OrderRow, **changes: Any) -> OrderRow:
    """The order's filled resolution."""
    fields: dict[str, Any] = {
        "kind": OrderRowKind.RESOLUTION,
        "status": OrderStatus.FILLED,
        "kalshi_order_id": "k-1",
        "fill_count": "3.00",
    }
    fields.update(changes)
    return dataclasses.replace(row, **fields)


def test_an_intent_the_database_lacks_is_written_pending_once(
    db: tuple[sqlite3.Connection, Path],
) -> None:
    """A pending row that died in the channel is written from the journal, as ``pending`` (for
    reconciliation to resolve); a second replay writes nothing more."""
    connection, path = db
    lost = order_row(client_order_id="a" * 32)
    journal(path, lost)
    outcome = replay_journal(connection, path)
    assert (outcome.orders, outcome.replayed, outcome.torn) == (1, 1, 0)
    assert table(connection) == [("a" * 32, "pending", None, lost.requested_at_ms)]
    again = replay_journal(connection, path)
    assert (again.orders, again.replayed) == (1, 0)
    assert len(table(connection)) == 1


def test_rows_already_in_the_database_are_left_as_they_are(
    db: tuple[sqlite3.Connection, Path],
) -> None:
    """The usual case after a kill: the rows landed, the journal was not compacted yet; a
    resolved row is never set back to pending by its intent."""
    connection, path = db
    landed = order_row(client_order_id="b" * 32)
    write_batch(connection, list[TelemetryRow]([landed, resolution(landed)]))
    journal(path, landed)
    assert replay_journal(connection, path).replayed == 0
    assert table(connection) == [("b" * 32, "filled", "k-1", landed.requested_at_ms)]


def test_a_resolution_the_database_refused_replaces_its_pending_row(
    db: tuple[sqlite3.Connection, Path],
) -> None:
    """An owed resolution (kept during an outage) lands over the pending row, which keeps its
    requested_at_ms."""
    connection, path = db
    landed = order_row(client_order_id="c" * 32)
    write_batch(connection, list[TelemetryRow]([landed]))
    journal(path, landed, resolution(landed, requested_at_ms=landed.requested_at_ms + 99))
    assert replay_journal(connection, path).replayed == 1
    assert table(connection) == [("c" * 32, "filled", "k-1", landed.requested_at_ms)]


def test_a_torn_record_is_counted_and_the_rest_replayed(
    db: tuple[sqlite3.Connection, Path],
) -> None:
    """A journal whose last record was cut short replays the whole records and counts one torn."""
    connection, path = db
    journal(path, order_row(client_order_id="d" * 32), order_row(client_order_id="e" * 32))
    with journal_path(path).open("r+b") as file:
        file.truncate(journal_path(path).stat().st_size - 10)
    outcome = replay_journal(connection, path)
    assert (outcome.replayed, outcome.torn) == (1, 1)
    assert [row[0] for row in table(connection)] == ["d" * 32]


def test_a_database_that_refuses_the_rows_stops_the_start_and_keeps_the_journal(
    db: tuple[sqlite3.Connection, Path],
) -> None:
    """A full disk (a trigger raising SQLite's error) makes the replay a start-up error; the
    journal still holds the row for the next try."""
    connection, path = db
    connection.execute(
        "CREATE TRIGGER full BEFORE INSERT ON orders_fired"
        " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    journal(path, order_row(client_order_id="f" * 32))
    with pytest.raises(TelemetryOpenError, match="disk is full"):
        replay_journal(connection, path)
    assert [row.client_order_id for row in read_journal(journal_path(path)).rows] == ["f" * 32]
    with contextlib.suppress(sqlite3.Error):
        connection.execute("DROP TRIGGER full")
    assert replay_journal(connection, path).replayed == 1


class FullDisk:
    """The writer's connection on a disk that is full: the lock is taken, the write refused."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.statements: list[str] = []

    def execute(self, sql: str, *args: Any) -> Any:
        self.statements.append(sql)
        if sql.startswith("PRAGMA user_version ="):
            raise sqlite3.OperationalError("database or disk is full")
        return self.connection.execute(sql, *args)

    @property
    def in_transaction(self) -> bool:
        return self.connection.in_transaction


def test_proving_the_database_writable_fails_when_the_write_itself_fails(
    db: tuple[sqlite3.Connection, Path],
) -> None:
    """BEGIN IMMEDIATE succeeds but the write is refused (a full disk): the proof fails with a
    clear line, and the transaction is not left open (the negative twin: the real file passes)."""
    connection, path = db
    prove_writable(connection, path)
    full = FullDisk(connection)
    with pytest.raises(TelemetryOpenError, match=r"not writable .*disk is full"):
        prove_writable(full, path)  # type: ignore[arg-type]
    assert "BEGIN IMMEDIATE" in full.statements
    assert not connection.in_transaction
