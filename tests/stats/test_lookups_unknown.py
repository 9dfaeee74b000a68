"""``lookups_unknown`` in ``executor stats``: a live counter, kept with each heartbeat in the
executor's own table (``executor_heartbeats``) and shown per instance beside its heartbeat.

The writer's part on a real file, the report's part on a file built by hand (heartbeats of
several writers), and the whole way in an in-process executor whose lookup ends unknown.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
import trio

import executor.exchange.follow.lookup as order_lookup_module
import executor.exchange.follow.reconcile as reconcile_module
import executor.exchange.orders.transport as transport_module
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault
from executor.recording.database import close_database, open_database
from executor.recording.rows import HeartbeatRow
from executor.recording.sqlite_writer import write_batch
from executor.stats.command import stats_main
from executor.trading.factory import OrderPathFactory
from executor.wire.client import connect
from tests.service.test_fire_e2e import query, real_wake, settings_for
from tests.support.inprocess import start_server

REFERENCE_HEARTBEAT_COLUMNS = [
    "process",
    "pid",
    "started_at_ms",
    "beat_at_ms",
    "queue_depth",
    "dropped_rows",
]
"""DISPATCH.md §8's ``heartbeats``, exactly: the executor's counters may not widen it."""


def beat(process: str, pid: int, started_at_ms: int, lookups_unknown: int | None) -> HeartbeatRow:
    """A heartbeat of ``process``'s run (pid, start) beating at 5,000 with queue 7, 3 dropped."""
    return HeartbeatRow(process, pid, started_at_ms, 5_000, 7, 3, lookups_unknown)


def tables(db_path: Path) -> set[str]:
    """The file's table names."""
    rows = query(db_path, "SELECT name FROM sqlite_master WHERE type = 'table'")
    return {str(name) for (name,) in rows}


def counted(db_path: Path) -> list[tuple[object, ...]]:
    """The committed ``executor_heartbeats.lookups_unknown`` values (none before the table)."""
    try:
        return query(db_path, "SELECT lookups_unknown FROM executor_heartbeats")
    except sqlite3.OperationalError:  # no such table yet
        return []


def test_the_writer_keeps_the_counter_beside_the_reference_heartbeat(tmp_path: Path) -> None:
    """A heartbeat without counters (no exchange) leaves only the reference's tables; one with
    them replaces the instance's executor_heartbeats row (same run columns) and leaves the
    heartbeats table its six reference columns."""
    db_path = tmp_path / "t.db"
    connection, _ = open_database(db_path)
    try:
        write_batch(connection, [beat("executor:/a.sock", 42, 1_000, None)])
        assert "executor_heartbeats" not in tables(db_path)
        write_batch(connection, [beat("executor:/a.sock", 42, 1_000, 2)])
        write_batch(connection, [beat("executor:/a.sock", 42, 1_000, 5)])
    finally:
        close_database(connection, db_path)
    assert query(db_path, "SELECT * FROM executor_heartbeats") == [
        ("executor:/a.sock", 42, 1_000, 5_000, 5)
    ]
    columns = [row[1] for row in query(db_path, "PRAGMA table_info(heartbeats)")]
    assert columns == REFERENCE_HEARTBEAT_COLUMNS


def test_stats_shows_each_instances_count_of_its_own_run_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three heartbeats: an executor whose counters row is of the same run shows its count;
    the reference's (no counters row) and one whose counters row is of an earlier run (another
    pid and start) show none, in JSON (null) and in the text (no lookups_unknown=)."""
    db_path = tmp_path / "t.db"
    connection, _ = open_database(db_path)
    try:
        write_batch(connection, [beat("executor:/a.sock", 42, 1_000, 4)])
        write_batch(connection, [beat("executor:/b.sock", 43, 2_000, 9)])
    finally:
        close_database(connection, db_path)
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.execute("INSERT INTO heartbeats VALUES ('executor', 50, 3000, 5000, 0, 0)")
        db.execute("UPDATE heartbeats SET pid = 44, started_at_ms = 4000 WHERE pid = 43")
    capsys.readouterr()
    assert stats_main(["--telemetry-db", str(db_path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    shown = {entry["process"]: entry["lookups_unknown"] for entry in document["heartbeats"]}
    assert shown == {"executor": None, "executor:/a.sock": 4, "executor:/b.sock": None}
    assert stats_main(["--telemetry-db", str(db_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "pid=" in line]
    assert [line.endswith("lookups_unknown=4") for line in lines] == [False, True, False]
    assert sum("lookups_unknown" in line for line in lines) == 1


async def test_a_running_executors_unknown_lookup_reaches_executor_stats(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An order never placed whose lookups end unknown (the exchange's data not yet past its
    send): a heartbeat after that carries lookups_unknown=1, and executor stats shows it for
    the instance after the executor stopped."""
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(reconcile_module, "RECONCILE_DELAYS_S", (0.0, 0.0, 0.0))
    monkeypatch.setattr(order_lookup_module, "ABSENCE_MARGIN_MS", 10_000)
    fake_exchange.inject(Fault("hang"))
    factory = OrderPathFactory(
        settings_for(fake_exchange, fake_credentials),
        telemetry_db=short_dir / "t.db",
        kill_switch=None,
        socket_path=short_dir / "x.sock",
    )
    factory.heartbeat_interval_s = 0.05
    running = await start_server(nursery, short_dir, order_path=factory)
    async with connect(running.socket_path) as client:
        await client.request(real_wake("not-yet"))
        with trio.fail_after(20):  # a bound on a wait, not a timing assertion
            while counted(running.db_path) != [(1,)]:  # noqa: ASYNC110 - the writer commits
                await trio.sleep(0.05)
    await running.shutdown()
    capsys.readouterr()
    assert stats_main(["--telemetry-db", str(running.db_path), "--json"]) == 0
    (heartbeat,) = json.loads(capsys.readouterr().out)["heartbeats"]
    assert heartbeat["process"] == f"executor:{short_dir / 'x.sock'}"
    assert heartbeat["lookups_unknown"] == 1
