"""Telemetry: the channel, the batching consumer and the SQLite file it writes."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing

from executor.clock import wall_ms
from executor.recording.rows import HeartbeatRow
from executor.telemetry import (
    REFERENCE_USER_VERSION,
    LatencyRow,
    Stage,
    Telemetry,
    TelemetryOpenError,
    TelemetryStatistics,
    latency_row,
    serve_telemetry,
    wake_recv_row,
)
from tests.support.rows import order_row

_REFERENCE_TABLES = """
CREATE TABLE correlations (
    correlation_id  TEXT    PRIMARY KEY,
    created_at_ms   INTEGER NOT NULL
);
CREATE TABLE latency_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    correlation_id  TEXT    NOT NULL REFERENCES correlations (correlation_id),
    stage           TEXT    NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL,
    duration_ms     REAL    NOT NULL,
    metadata_json   TEXT,
    created_at_ms   INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000)
);
"""

_POISON_TRIGGER = """
CREATE TRIGGER refuse_poison BEFORE INSERT ON latency_events
WHEN NEW.correlation_id LIKE 'poison%'
BEGIN
    SELECT RAISE(ABORT, 'poisoned row');
END;
"""


def _row(correlation_id: str, index: int = 0) -> LatencyRow:
    return wake_recv_row(correlation_id, 1_000 + index, 1_001 + index, 50_000 + index, False)


def _rows(count: int, prefix: str = "c") -> list[LatencyRow]:
    return [_row(f"{prefix}-{index}", index) for index in range(count)]


def _query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    # sqlite3's context manager only commits; closing() closes (3.13 warns of a leaked one).
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


def _event_ids(path: Path) -> list[str]:
    return [cid for (cid,) in _query(path, "SELECT correlation_id FROM latency_events ORDER BY id")]


def _user_version(path: Path) -> int:
    ((version,),) = _query(path, "PRAGMA user_version")
    return int(version)


def _make_existing_db(path: Path, script: str, user_version: int) -> None:
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.execute(f"PRAGMA user_version = {user_version}")
    connection.commit()
    connection.close()


async def _record_and_close(
    path: Path, rows: Iterable[LatencyRow], **options: Any
) -> TelemetryStatistics:
    """Start a consumer, record ``rows`` before it runs, close, and return the final counters."""
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, **options)
        )
        for row in rows:
            telemetry.record(row)
        telemetry.close()
    return telemetry.statistics()


# --- rows ---


async def test_wake_recv_rows_are_written_with_exact_columns(tmp_path: Path) -> None:
    """A wake_recv row lands with its values, the exact metadata strings and defaulted columns."""
    path = tmp_path / "telemetry.db"
    before_ms = wall_ms()
    rows = [
        wake_recv_row("corr-a", 1_700_000_000_000, 1_700_000_000_001, 123_456, False),
        wake_recv_row("corr-b", 1_700_000_000_002, 1_700_000_000_003, 7, True),
    ]
    statistics = await _record_and_close(path, rows)
    after_ms = wall_ms()

    assert statistics.rows_written == 2
    events = _query(
        path,
        "SELECT id, correlation_id, stage, started_at_ms, ended_at_ms, duration_ms,"
        " metadata_json, created_at_ms FROM latency_events ORDER BY id",
    )
    assert [event[1:7] for event in events] == [
        (
            "corr-a",
            "wake_recv",
            1_700_000_000_000,
            1_700_000_000_001,
            0.123456,
            '{"dry_run": false}',
        ),
        (
            "corr-b",
            "wake_recv",
            1_700_000_000_002,
            1_700_000_000_003,
            0.000007,
            '{"dry_run": true}',
        ),
    ]
    assert events[0][0] < events[1][0]
    for event in events:
        # The column default has second resolution: a whole second, within the test's span.
        assert event[7] % 1000 == 0
        assert before_ms // 1000 * 1000 <= event[7] <= after_ms
    assert _query(
        path, "SELECT typeof(duration_ms), typeof(stage) FROM latency_events LIMIT 1"
    ) == [("real", "text")]


def test_wake_recv_row_builds_metadata_and_float_duration() -> None:
    """wake_recv_row divides nanoseconds into float ms and picks the prebuilt metadata string."""
    row = wake_recv_row("x", 10, 11, 1_500_000, True)
    assert row == LatencyRow("x", Stage.WAKE_RECV, 10, 11, 1.5, '{"dry_run": true}')
    assert isinstance(row.duration_ms, float)
    assert wake_recv_row("x", 10, 11, 2, False).metadata_json == '{"dry_run": false}'


def test_latency_row_accepts_every_reference_stage() -> None:
    """Every stage in the reference vocabulary, as a string, builds a row with the enum member."""
    names = [
        "detect_fire",
        "ingest_fetch",
        "decision",
        "wake_send",
        "wake_recv",
        "order_build",
        "sign",
        "dispatch_send",
        "dispatch_ack",
        "telemetry_write",
        "dispatch_wire",
        "detect_wire",
        "stream_row",
        "wire_engine",
        "engine_ack",
        "wake_frame",
    ]
    assert [member.value for member in Stage] == names
    for name in names:
        assert latency_row("c", name, 1, 2, 0.5).stage is Stage(name)


def test_latency_row_refuses_a_misspelt_stage() -> None:
    """A stage string outside the vocabulary is a ValueError where the row is made."""
    with pytest.raises(ValueError, match="wake_recieve"):
        latency_row("c", "wake_recieve", 1, 2, 0.5)
    with pytest.raises(ValueError):
        latency_row("c", "WAKE_RECV", 1, 2, 0.5)


async def test_every_event_has_its_correlation_parent(tmp_path: Path) -> None:
    """Each event has its correlation row (one per id, stamped now); foreign keys check clean."""
    path = tmp_path / "telemetry.db"
    before_ms = wall_ms()
    rows = [*_rows(3), _row("c-0", 9)]
    statistics = await _record_and_close(path, rows)

    assert statistics.rows_written == 4
    assert _query(path, "PRAGMA foreign_key_check") == []
    orphans = _query(
        path,
        "SELECT count(*) FROM latency_events e"
        " LEFT JOIN correlations c ON c.correlation_id = e.correlation_id"
        " WHERE c.correlation_id IS NULL",
    )
    assert orphans == [(0,)]
    correlations = _query(path, "SELECT correlation_id, created_at_ms FROM correlations")
    assert sorted(cid for cid, _ in correlations) == ["c-0", "c-1", "c-2"]
    assert all(before_ms <= created <= wall_ms() for _, created in correlations)


# --- batching ---


async def test_rows_beyond_one_batch_are_all_written_in_several_commits(tmp_path: Path) -> None:
    """1200 rows queued at once are written in batches of at most 500: all rows, three commits."""
    path = tmp_path / "telemetry.db"
    rows = _rows(1200)
    statistics = await _record_and_close(path, rows)

    assert statistics.rows_written == 1200
    assert statistics.batches_committed == 3
    assert _event_ids(path) == [row.correlation_id for row in rows]


async def test_a_large_batch_limit_commits_the_same_rows_at_once(tmp_path: Path) -> None:
    """With a 1200-row limit the same queue is one commit (the twin of the three-batch case)."""
    path = tmp_path / "telemetry.db"
    statistics = await _record_and_close(path, _rows(1200), batch_max_rows=1200)

    assert statistics.rows_written == 1200
    assert statistics.batches_committed == 1


async def _record_one_at_a_time(path: Path, count: int, linger_s: float) -> TelemetryStatistics:
    """Record ``count`` rows one by one, each after the consumer went idle, then close."""
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, linger_s=linger_s)
        )
        for index, row in enumerate(_rows(count)):
            telemetry.record(row)
            # Idle means: lingering (nothing written yet) or done writing this row.
            while linger_s == 0 and telemetry.statistics().rows_written <= index:  # noqa: ASYNC110
                await trio.sleep(0.001)
            await trio.testing.wait_all_tasks_blocked()
        telemetry.close()
    return telemetry.statistics()


async def test_linger_gathers_rows_that_trickle_in_into_one_commit(tmp_path: Path) -> None:
    """Rows arriving one by one within the linger window are committed together, and close()
    ends the linger at once (a 60 s linger does not hold up shutdown)."""
    statistics = await _record_one_at_a_time(tmp_path / "t.db", 5, linger_s=60.0)

    assert statistics.rows_written == 5
    assert statistics.batches_committed == 1


async def test_without_linger_each_trickling_row_is_its_own_commit(tmp_path: Path) -> None:
    """With linger 0 (the twin) every row that arrives alone is committed alone."""
    statistics = await _record_one_at_a_time(tmp_path / "t.db", 5, linger_s=0.0)

    assert statistics.rows_written == 5
    assert statistics.batches_committed == 5


async def test_a_failing_row_does_not_sink_its_batch(tmp_path: Path) -> None:
    """A row refused by the database is dropped and counted; the rest of its batch is written."""
    path = tmp_path / "telemetry.db"
    _make_existing_db(path, _REFERENCE_TABLES + _POISON_TRIGGER, 6)
    rows = [_row("good-1"), _row("poison-1"), _row("good-2")]
    with structlog.testing.capture_logs() as logs:
        statistics = await _record_and_close(path, rows)

    assert statistics.rows_written == 2
    assert statistics.dropped_write_failed == 1
    assert statistics.batches_committed == 0
    assert _event_ids(path) == ["good-1", "good-2"]
    # The failed row's transaction was rolled back whole: no orphan correlation either.
    assert sorted(_query(path, "SELECT correlation_id FROM correlations")) == [
        ("good-1",),
        ("good-2",),
    ]
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["correlation_id"] == "poison-1"
    assert "poisoned row" in warnings[0]["error"]


async def test_write_failure_warnings_are_rate_limited(tmp_path: Path) -> None:
    """Many failing rows give one warning now and one summary of the suppressed count at close."""
    path = tmp_path / "telemetry.db"
    _make_existing_db(path, _REFERENCE_TABLES + _POISON_TRIGGER, 6)
    rows = [*_rows(5, "poison"), _row("good")]
    with structlog.testing.capture_logs() as logs:
        statistics = await _record_and_close(path, rows)

    assert statistics.dropped_write_failed == 5
    assert statistics.rows_written == 1
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 2
    assert warnings[0]["suppressed"] == 0
    assert warnings[1]["suppressed"] == 4


async def test_an_unbindable_row_is_counted_not_fatal(tmp_path: Path) -> None:
    """An id sqlite3 cannot encode (a lone surrogate) is dropped and counted; others are written."""
    path = tmp_path / "telemetry.db"
    statistics = await _record_and_close(path, [_row("\ud800"), _row("fine")])

    assert statistics.dropped_write_failed == 1
    assert statistics.rows_written == 1
    assert _event_ids(path) == ["fine"]


# --- backpressure and shutdown ---


async def test_a_full_channel_drops_and_counts_without_blocking(tmp_path: Path) -> None:
    """With the consumer parked, rows past the capacity are dropped and counted, never awaited."""
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, capacity=4)
        )
        await trio.testing.wait_all_tasks_blocked()
        for row in _rows(10):
            telemetry.record(row)  # synchronous: a full channel cannot make this wait
        during = telemetry.statistics()
        telemetry.close()
    final = telemetry.statistics()

    # The parked receiver takes the first row directly; four fill the buffer; five are dropped.
    assert during.queued == 4
    assert during.dropped_ring_full == 5
    assert final.rows_written == 5
    assert final.rows_written + final.dropped_ring_full == 10
    assert _event_ids(path) == ["c-0", "c-1", "c-2", "c-3", "c-4"]


async def test_a_channel_with_room_drops_nothing(tmp_path: Path) -> None:
    """The same ten rows into a channel of sixteen are all written (the twin of the drop case)."""
    path = tmp_path / "telemetry.db"
    statistics = await _record_and_close(path, _rows(10), capacity=16)

    assert statistics.dropped_ring_full == 0
    assert statistics.rows_written == 10


async def test_close_drains_every_queued_row(tmp_path: Path) -> None:
    """Rows recorded right before close are all written before serve_telemetry returns."""
    path = tmp_path / "telemetry.db"
    statistics = await _record_and_close(path, _rows(3000))

    assert statistics.rows_written == 3000
    assert statistics.queued == 0
    assert len(_event_ids(path)) == 3000


async def test_record_after_close_counts_as_dropped(tmp_path: Path) -> None:
    """A row recorded after close is counted as dropped_ring_full and record does not raise."""
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(serve_telemetry, path)
        telemetry.close()
        telemetry.record(_row("late"))
    telemetry.record(_row("later"))

    assert telemetry.statistics().dropped_ring_full == 2
    assert _event_ids(path) == []


async def test_cancelling_the_consumer_still_writes_held_and_queued_rows(tmp_path: Path) -> None:
    """Cancelled right after rows are recorded, the consumer still commits every one of them."""
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(serve_telemetry, path)
        for row in _rows(700):
            telemetry.record(row)
        nursery.cancel_scope.cancel()
    statistics = telemetry.statistics()

    assert statistics.rows_written == 700
    assert statistics.dropped_write_failed == 0
    assert len(_event_ids(path)) == 700


async def test_cancelling_mid_batch_finishes_the_batch_and_the_queue(tmp_path: Path) -> None:
    """Cancelled while a batch is in the worker thread, the consumer writes it and the rest."""
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(serve_telemetry, path)
        for row in _rows(1200):
            telemetry.record(row)
        await trio.testing.wait_all_tasks_blocked()  # the consumer now waits on its worker
        nursery.cancel_scope.cancel()
        telemetry.record(_row("after-cancel"))
    statistics = telemetry.statistics()

    # Two batches of 500 were in the writer thread and are finished; the last 200 were held
    # (lingering for more) and the drain writes them, then the row recorded after the cancel,
    # still queued when the drain ran.
    assert statistics.rows_written == 1201
    assert statistics.batches_committed == 4
    assert len(_event_ids(path)) == 1201


async def test_rows_the_drain_deadline_leaves_are_counted_as_failed(tmp_path: Path) -> None:
    """With no time to drain, a cancelled consumer counts every held and queued row as failed."""
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, drain_timeout_s=0)
        )
        for row in _rows(50):
            telemetry.record(row)
        nursery.cancel_scope.cancel()
    statistics = telemetry.statistics()

    assert statistics.rows_written == 0
    assert statistics.dropped_write_failed == 50
    assert _event_ids(path) == []


# --- oversized ids ---


async def test_ids_over_128_utf8_bytes_are_dropped_and_counted(tmp_path: Path) -> None:
    """Ids of 129 UTF-8 bytes are dropped and counted; 128 bytes (multibyte too) are written."""
    path = tmp_path / "telemetry.db"
    exactly_128 = ["é" * 64, "a" * 128, "€" * 42 + "ab"]
    over_128 = ["é" * 64 + "a", "a" * 129, "€" * 43]
    assert [len(cid.encode()) for cid in exactly_128] == [128, 128, 128]
    assert [len(cid.encode()) for cid in over_128] == [129, 129, 129]
    rows = [_row(cid) for cid in [*exactly_128, *over_128]]
    statistics = await _record_and_close(path, rows)

    assert statistics.dropped_oversized_id == 3
    assert statistics.rows_written == 3
    assert _event_ids(path) == exactly_128


# --- the database file ---


async def test_a_new_file_is_stamped_with_the_reference_version_and_wal(tmp_path: Path) -> None:
    """A file this process creates (parent dir too) gets user_version 6, WAL and the indexes."""
    path = tmp_path / "missing-dir" / "telemetry.db"
    await _record_and_close(path, [_row("a")])

    assert _user_version(path) == REFERENCE_USER_VERSION == 6
    assert _query(path, "PRAGMA journal_mode") == [("wal",)]
    indexes = _query(
        path, "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'idx_%'"
    )
    assert sorted(name for (name,) in indexes) == [
        "idx_latency_events_correlation_id",
        "idx_latency_events_stage",
        "idx_latency_events_started_at",
        "idx_orders_fired_correlation_id",
        "idx_orders_fired_requested_at",
        "idx_orders_fired_status",
        "idx_orders_fired_ticker",
    ]


async def test_an_empty_existing_file_counts_as_created(tmp_path: Path) -> None:
    """A zero-byte file at the path is initialised like a new one and stamped user_version 6."""
    path = tmp_path / "telemetry.db"
    path.touch()
    await _record_and_close(path, [_row("a")])

    assert _user_version(path) == 6
    assert _event_ids(path) == ["a"]


async def test_an_existing_files_user_version_and_rows_are_kept(tmp_path: Path) -> None:
    """On an existing file at user_version 3, the version stays 3 and earlier rows stay."""
    path = tmp_path / "telemetry.db"
    _make_existing_db(
        path,
        _REFERENCE_TABLES
        + "INSERT INTO correlations VALUES ('old', 1);"
        + "INSERT INTO latency_events (correlation_id, stage, started_at_ms, ended_at_ms,"
        " duration_ms) VALUES ('old', 'wake_send', 1, 2, 0.5);",
        3,
    )
    await _record_and_close(path, [_row("new")])

    assert _user_version(path) == 3
    assert _event_ids(path) == ["old", "new"]
    assert _query(path, "PRAGMA journal_mode") == [("wal",)]


async def test_an_existing_file_at_version_zero_stays_zero(tmp_path: Path) -> None:
    """A non-empty existing file with user_version 0 (other tables only) is not stamped."""
    path = tmp_path / "telemetry.db"
    _make_existing_db(
        path, "CREATE TABLE unrelated (x INTEGER); INSERT INTO unrelated VALUES (1);", 0
    )
    await _record_and_close(path, [_row("a")])

    assert _user_version(path) == 0
    assert _query(path, "SELECT x FROM unrelated") == [(1,)]
    assert _event_ids(path) == ["a"]


async def test_a_directory_at_the_path_is_an_open_error(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A directory where the database should be raises TelemetryOpenError naming the path."""
    path = tmp_path / "telemetry.db"
    path.mkdir()
    with pytest.raises(TelemetryOpenError, match=str(path)) as raised:
        await nursery.start(serve_telemetry, path)
    assert "\n" not in str(raised.value)


async def test_a_path_under_a_regular_file_is_an_open_error(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A database path whose parent is a regular file raises TelemetryOpenError naming the path."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    path = blocker / "telemetry.db"
    with pytest.raises(TelemetryOpenError, match=str(path)):
        await nursery.start(serve_telemetry, path)


async def test_a_file_that_is_not_a_database_is_an_open_error(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """A regular file of non-SQLite bytes raises TelemetryOpenError and is left as it was."""
    path = tmp_path / "telemetry.db"
    content = b"this is not an sqlite database, just text " * 20
    path.write_bytes(content)
    with pytest.raises(TelemetryOpenError, match=str(path)):
        await nursery.start(serve_telemetry, path)
    assert path.read_bytes() == content


async def test_a_mixed_batch_counts_each_kind_apart_in_arrival_order(tmp_path: Path) -> None:
    """Latency rows interleaved with order and heartbeat rows keep their order and their counts."""
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(serve_telemetry, path)
        for index in range(300):
            telemetry.record(_row(f"c-{index}", index))
            if index % 100 == 50:
                telemetry.record_pending(order_row(client_order_id=f"{index:032d}"))
                await telemetry.record_order(HeartbeatRow("executor", 1, 0, index, 0, 0))
        telemetry.close()
    statistics = telemetry.statistics()

    assert statistics.rows_written == 300
    assert statistics.order_rows_written == 3
    assert (statistics.dropped_write_failed, statistics.order_rows_dropped) == (0, 0)
    assert _event_ids(path) == [f"c-{index}" for index in range(300)]
    assert _query(path, "SELECT beat_at_ms FROM heartbeats") == [(250,)]
