"""Telemetry faults under a running executor: writes fail, the file is locked, the writer crawls.

Tests run as root, so a read-only ``chmod`` would not stop the writer. Faults are made instead by:

- a trigger that aborts every ``latency_events`` insert while a flag row says so (SQLite's own
  error path, toggled from outside to make the fault appear and clear);
- a real full disk: a tiny tmpfs mounted under the test (skipped where mounting is not allowed);
- another connection holding ``BEGIN IMMEDIATE`` past the executor's 5 s busy timeout (slow).

In every case requests keep being acked while rows are dropped and counted, and the counters
still account for every acked frame.
"""

from __future__ import annotations

import contextlib
import sqlite3
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog.testing
import trio
import trio.testing

from executor.wire.client import ExecutorClient, connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import RunningServer, make_wake, start_server

FAULT_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS fault (active INTEGER NOT NULL)",
    "INSERT INTO fault VALUES (0)",
    "CREATE TRIGGER IF NOT EXISTS disk_full BEFORE INSERT ON latency_events"
    " WHEN (SELECT active FROM fault) BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
)
ROW_DROPPED = "telemetry row dropped: write failed"


@contextlib.contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    """A second, autocommit connection to the executor's file (what another process would hold)."""
    connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def install_fault(path: Path) -> None:
    with database(path) as db:
        for statement in FAULT_SCHEMA:
            db.execute(statement)


def set_fault(path: Path, active: bool) -> None:
    with database(path) as db:
        db.execute("UPDATE fault SET active = ?", (int(active),))


def row_ids(path: Path) -> list[str]:
    with database(path) as db:
        rows = db.execute(
            "SELECT correlation_id FROM latency_events WHERE stage = 'wake_recv' ORDER BY id"
        ).fetchall()
    return [row[0] for row in rows]


async def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``condition``: the consumer works in a thread, which wait_all_tasks_blocked ignores."""
    with trio.fail_after(timeout_s):
        while not condition():  # noqa: ASYNC110 (the state changes in a worker thread)
            await trio.sleep(0.01)


async def timed_requests(client: ExecutorClient, prefix: str, count: int) -> list[float]:
    """Send ``count`` wakes one at a time; every one must be accepted; return latencies (ms)."""
    latencies = []
    for index in range(count):
        started = time.perf_counter()
        ack = await client.request(make_wake(f"{prefix}-{index}", dry_run=True))
        latencies.append((time.perf_counter() - started) * 1000)
        assert (ack.status, ack.correlation_id) == ("accepted", f"{prefix}-{index}")
    return latencies


def settled(running: RunningServer) -> bool:
    """Whether every acked frame's row has an outcome: SERVICE.md's telemetry identity."""
    server = running.server.statistics()
    telemetry = running.server.telemetry.statistics()
    return server.accepted - server.unacked == (
        telemetry.rows_written
        + telemetry.dropped_ring_full
        + telemetry.dropped_oversized_id
        + telemetry.dropped_write_failed
    )


def assert_accounted(running: RunningServer) -> None:
    """The telemetry identity holds (called after an orderly shutdown)."""
    assert settled(running)


async def test_failing_writes_are_dropped_counted_logged_once_and_recover(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """While inserts fail, acks go on and rows are counted dropped with one warning; then resume."""
    running = await start_server(nursery, short_dir)
    telemetry = running.server.telemetry
    await trio.to_thread.run_sync(install_fault, running.db_path)
    with structlog.testing.capture_logs() as logs:
        async with connect(running.socket_path) as client:
            healthy = await timed_requests(client, "before", 20)
            await wait_until(lambda: telemetry.statistics().rows_written == 20)

            await trio.to_thread.run_sync(set_fault, running.db_path, True)
            faulty = await timed_requests(client, "during", 300)
            await wait_until(lambda: telemetry.statistics().dropped_write_failed == 300)

            await trio.to_thread.run_sync(set_fault, running.db_path, False)
            await timed_requests(client, "after", 20)
        await running.shutdown()

    final = telemetry.statistics()
    assert (final.rows_written, final.dropped_write_failed) == (40, 300)
    ids = await trio.to_thread.run_sync(row_ids, running.db_path)
    assert ids == [f"before-{i}" for i in range(20)] + [f"after-{i}" for i in range(20)]
    assert_accounted(running)
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    per_row = [entry for entry in warnings if entry["event"] == ROW_DROPPED]
    assert len(per_row) == 1, "a failing disk must not flood the log"
    assert "disk is full" in per_row[0]["error"]
    # The rest are summed into the one summary written at close.
    assert sum(entry.get("suppressed", 0) for entry in warnings) == 299
    print(
        f"\nack latency median: healthy {statistics.median(healthy):.3f} ms,"
        f" during write failures {statistics.median(faulty):.3f} ms"
    )


async def test_without_the_fault_every_row_is_written(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """Negative twin: the installed but inactive trigger drops nothing and logs nothing."""
    running = await start_server(nursery, short_dir)
    await trio.to_thread.run_sync(install_fault, running.db_path)
    with structlog.testing.capture_logs() as logs:
        async with connect(running.socket_path) as client:
            await timed_requests(client, "ok", 50)
        await running.shutdown()
    final = running.server.telemetry.statistics()
    assert (final.rows_written, final.dropped_write_failed) == (50, 0)
    assert [entry for entry in logs if entry["log_level"] == "warning"] == []


@pytest.mark.parametrize(("capacity", "drops"), [(16, True), (8192, False)])
async def test_a_stalled_writer_fills_the_channel_without_stalling_acks(
    nursery: trio.Nursery, short_dir: Path, capacity: int, drops: bool
) -> None:
    """With the writer blocked on a lock, a 16-row channel drops rows, yet all 500 frames are acked.

    The 8192-row twin drops nothing under the same stall.
    """
    running = await start_server(nursery, short_dir, telemetry_capacity=capacity)
    telemetry = running.server.telemetry
    with database(running.db_path) as blocker:
        blocker.execute("BEGIN IMMEDIATE")  # the consumer's next commit waits on this lock
        try:
            async with connect(running.socket_path) as client:
                await client.request(make_wake("first"))
                # The consumer has taken "first" and sits in its worker thread, waiting.
                await wait_until(lambda: telemetry.statistics().queued == 0)
                ids = [f"flood-{i}" for i in range(500)]
                frames = b"".join(encode_frame(make_wake(cid)) for cid in ids)
                async with trio.open_nursery() as sender:
                    # Send while reading: a peer that only writes deadlocks on its own acks.
                    sender.start_soon(client.send_raw, frames)
                    acks = [await client.receive_ack() for _ in ids]
                during = telemetry.statistics()
        finally:
            blocker.execute("ROLLBACK")
    await running.shutdown()

    assert [(ack.status, ack.correlation_id) for ack in acks] == [("accepted", c) for c in ids]
    final = telemetry.statistics()
    if drops:
        assert during.dropped_ring_full > 0
        assert final.rows_written + final.dropped_ring_full == 501
    else:
        assert during.dropped_ring_full == 0
        assert final.rows_written == 501
    assert final.dropped_ring_full == during.dropped_ring_full
    assert_accounted(running)


@pytest.mark.slow
async def test_a_lock_held_past_the_busy_timeout_drops_and_counts_then_recovers(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """A writer lock held past 5 s makes rows fail and count; acks never wait; writes resume."""
    running = await start_server(nursery, short_dir)
    telemetry = running.server.telemetry
    with structlog.testing.capture_logs() as logs:
        async with connect(running.socket_path) as client:
            with database(running.db_path) as blocker:
                blocker.execute("BEGIN IMMEDIATE")
                try:
                    await client.request(make_wake("locked-out"))
                    # Acked while the writer waits on the lock.
                    await timed_requests(client, "queued", 20)
                    await wait_until(lambda: telemetry.statistics().dropped_write_failed > 0)
                finally:
                    blocker.execute("ROLLBACK")
            await timed_requests(client, "after", 10)
        await running.shutdown()

    final = telemetry.statistics()
    ids = await trio.to_thread.run_sync(row_ids, running.db_path)
    assert "locked-out" not in ids
    assert ids[-10:] == [f"after-{i}" for i in range(10)]
    assert final.rows_written == len(ids)
    assert final.rows_written + final.dropped_write_failed == 31
    assert_accounted(running)
    per_row = [entry for entry in logs if entry["event"] == ROW_DROPPED]
    assert len(per_row) == 1
    assert "locked" in per_row[0]["error"]


def _mount_tmpfs(directory: Path, size: str, *, remount: bool = False) -> bool:
    options = f"remount,size={size}" if remount else f"size={size}"
    command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)]
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


async def test_a_really_full_disk_drops_rows_and_writing_resumes_when_space_returns(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """On a full tmpfs rows fail with SQLITE_FULL and are counted; after growing it, rows land."""
    mount_point = short_dir / "disk"
    mount_point.mkdir()
    if not await trio.to_thread.run_sync(_mount_tmpfs, mount_point, "256k"):
        pytest.skip("cannot mount a tmpfs here (needs root and mount rights)")
    try:
        # The socket lives on the tmpfs too: a socket file takes no space.
        running = await start_server(nursery, mount_point)
        telemetry = running.server.telemetry
        async with connect(running.socket_path) as client:
            index = 0
            # Fill the disk: keep sending until rows start failing (bounded by the tmpfs size).
            while telemetry.statistics().dropped_write_failed == 0:
                await timed_requests(client, f"fill{index}", 100)
                await wait_until(lambda: settled(running))
                index += 1
                assert index < 200, "a 256 KiB disk never filled"
            failed_before = telemetry.statistics().dropped_write_failed
            # Still acked while full.
            await timed_requests(client, "full", 50)
            await wait_until(lambda: settled(running))
            assert telemetry.statistics().dropped_write_failed > failed_before

            assert await trio.to_thread.run_sync(
                lambda: _mount_tmpfs(mount_point, "64m", remount=True)
            )
            written = telemetry.statistics().rows_written
            await timed_requests(client, "space", 50)
            await running.shutdown()
        final = telemetry.statistics()
        assert final.rows_written == written + 50
        assert_accounted(running)
        ids = await trio.to_thread.run_sync(row_ids, running.db_path)
        assert ids[-50:] == [f"space-{i}" for i in range(50)]
    finally:
        await trio.run_process(["umount", "-l", str(mount_point)], check=False)
