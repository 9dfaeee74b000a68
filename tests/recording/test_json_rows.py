"""The writer's latency rows go in as two statements over one JSON array, exactly as given.

The batch is written by ``write_batch`` directly on a file ``open_database`` made (no Trio, no
thread): what SQLite stores is read back and compared value for value, bit for bit for floats.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.recording.database import open_database
from executor.recording.rows import LatencyRow, Stage, latency_row, wake_recv_row
from executor.recording.sqlite_writer import write_batch
from tests.support.rows import order_row


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    with tempfile.TemporaryDirectory(prefix="json-rows-") as directory:
        opened, _ = open_database(Path(directory) / "telemetry.db")
        with contextlib.closing(opened):
            yield opened


def _stored(connection: sqlite3.Connection) -> list[tuple[object, ...]]:
    return connection.execute(
        "SELECT correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json"
        " FROM latency_events ORDER BY id"
    ).fetchall()


def _bits(value: float) -> str:
    return struct.pack(">d", value).hex()


def test_durations_are_stored_bit_for_bit(connection: sqlite3.Connection) -> None:
    """Two thousand durations of every magnitude come back as exactly the same doubles."""
    rng = random.Random(20261202)
    durations = [rng.lognormvariate(-3.0, 2.0) for _ in range(1990)]
    durations += [
        0.0,
        5e-324,
        2.2250738585072014e-308,
        1e-300,
        0.1,
        1 / 3,
        1e300,
        1.7976931348623157e308,
    ]
    durations += [123456789.123456789, 2.0**52 + 0.5]
    rows = [
        latency_row(f"d{index}", Stage.WAKE_RECV, 1, 2, duration, None)
        for index, duration in enumerate(durations)
    ]
    for start in range(0, len(rows), 500):
        assert write_batch(connection, list(rows[start : start + 500])).committed_as_batch
    stored = [row[4] for row in _stored(connection)]
    assert [_bits(value) for value in stored] == [_bits(value) for value in durations]  # type: ignore[arg-type]


def test_text_and_integers_are_stored_exactly_in_order(connection: sqlite3.Connection) -> None:
    """Ids with quotes, backslashes, controls and astral characters, stamps and NULL metadata
    come back exactly, in arrival order, each with its correlations row."""
    ids = ["plain", 'quote"in', "back\\slash", "tab\tnl\n", "é-ü-中", "😀-astral", "", " "]
    rows: list[LatencyRow] = [
        wake_recv_row(cid, 1_787_289_600_123 + i, 1_787_289_600_124 + i, 7_000 + i, i % 2 == 0)
        for i, cid in enumerate(ids)
    ]
    rows.append(latency_row("no-metadata", Stage.SIGN, 5, 6, 0.25, None))
    outcome = write_batch(connection, list(rows))
    assert outcome.committed_as_batch and outcome.rows_written == len(rows)
    assert _stored(connection) == [tuple(row) for row in rows]
    types = connection.execute(
        "SELECT DISTINCT typeof(started_at_ms), typeof(ended_at_ms), typeof(duration_ms)"
        " FROM latency_events"
    ).fetchall()
    assert types == [("integer", "integer", "real")]
    parents = {row[0] for row in connection.execute("SELECT correlation_id FROM correlations")}
    assert parents == {row.correlation_id for row in rows}


def test_a_batch_of_latency_rows_is_four_statements_whatever_its_size(
    connection: sqlite3.Connection,
) -> None:
    """500 rows and 3 rows each take BEGIN, two INSERTs and COMMIT: four GIL retakes, not ~16."""
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    for count in (500, 3):
        statements.clear()
        rows = [_plain(f"s{count}-{i}") for i in range(count)]
        assert write_batch(connection, list(rows)).rows_written == count
        assert [s.split()[0] for s in statements] == ["BEGIN", "INSERT", "INSERT", "COMMIT"]


def _plain(correlation_id: str) -> LatencyRow:
    return wake_recv_row(correlation_id, 1_000, 1_001, 50_000, True)


def test_order_rows_between_runs_keep_arrival_order(connection: sqlite3.Connection) -> None:
    """Latency rows, an order row, more latency rows: both runs land, in order, with the order."""
    batch = [_plain("a0"), _plain("a1"), order_row(correlation_id="o"), _plain("b0")]
    outcome = write_batch(connection, batch)
    assert (outcome.rows_written, outcome.order_rows_written) == (3, 1)
    assert [row[0] for row in _stored(connection)] == ["a0", "a1", "b0"]


@pytest.mark.parametrize("stamp", [2**53, 2**63, 2**64])
def test_a_stamp_past_2_53_is_dropped_alone(connection: sqlite3.Connection, stamp: int) -> None:
    """A stamp past 2**53 (past int64 SQLite would hold it as a rounded REAL) is dropped and
    reported; the rows around it are written."""
    huge = latency_row("huge", Stage.WAKE_RECV, 1, stamp, 0.5, None)
    outcome = write_batch(connection, [_plain("before"), huge, _plain("after")])
    assert not outcome.committed_as_batch
    assert outcome.rows_written == 2
    assert [cid for cid, _ in outcome.failures] == ["huge"]
    assert [row[0] for row in _stored(connection)] == ["before", "after"]


def test_stamps_up_to_2_53_are_kept_exactly(connection: sqlite3.Connection) -> None:
    """The negative twin: 2**53 - 1 and -(2**53 - 1) are written, as those integers."""
    edge = latency_row("edge", Stage.WAKE_RECV, 2**53 - 1, -(2**53 - 1), 0.5, None)
    assert write_batch(connection, [edge]).committed_as_batch
    assert _stored(connection)[0][2:4] == (2**53 - 1, -(2**53 - 1))
