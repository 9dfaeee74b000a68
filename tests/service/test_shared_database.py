"""One telemetry file, one executor at a time: a second is refused and changes nothing; each
executor that has written the file is its own heartbeat row."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from executor.recording.heartbeat import HEARTBEAT_PROCESS
from tests.support.inprocess import make_wake
from tests.support.processes import (
    POLL_INTERVAL_S,
    START_TIMEOUT_S,
    Spawner,
    assert_one_line_failure,
    request_all,
    wake_recv_count,
)


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory`` with its bytes and modification time."""
    return {
        str(path.relative_to(directory)): (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and not path.name.endswith(".stderr")
    }


def _wait_for_rows(db_path: Path, count: int) -> None:
    """Poll until ``count`` wake_recv rows are committed (a hard deadline, never a sleep)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while wake_recv_count(db_path) < count:
        assert time.monotonic() < deadline, f"fewer than {count} rows in {db_path}"
        time.sleep(POLL_INTERVAL_S)


def test_a_second_executor_on_a_live_database_is_refused_and_changes_nothing(
    spawner: Spawner, short_dir: Path
) -> None:
    """Another socket, the same --telemetry-db: exit 1 with one line naming the file, no socket
    or lock file of its own left, not a byte of the database changed; the first serves on."""
    db_path = short_dir / "t.db"
    first = spawner.serve(short_dir / "a.sock", db_path)
    assert request_all(short_dir / "a.sock", [make_wake("before")])[0].status == "accepted"
    _wait_for_rows(db_path, 1)  # committed: the first executor is idle from here on
    before = _snapshot(short_dir)
    refused = spawner.run("serve", "--socket", short_dir / "b.sock", "--telemetry-db", db_path)
    assert refused.returncode == 1
    assert_one_line_failure(refused, "another executor is writing telemetry database", str(db_path))
    assert _snapshot(short_dir) == before
    assert not (short_dir / "b.sock").exists() and not (short_dir / "b.sock.lock").exists()
    assert request_all(short_dir / "a.sock", [make_wake("after")])[0].status == "accepted"
    first.signal(signal.SIGTERM)
    assert first.wait() == 0


def test_the_database_is_free_again_once_its_executor_stops(
    spawner: Spawner, short_dir: Path
) -> None:
    """The negative twin: after the first executor's orderly exit (or a SIGKILL), another
    executor on another socket opens the same file."""
    db_path = short_dir / "t.db"
    first = spawner.serve(short_dir / "a.sock", db_path)
    first.signal(signal.SIGTERM)
    assert first.wait() == 0
    second = spawner.serve(short_dir / "b.sock", db_path)
    second.signal(signal.SIGKILL)
    second.wait()
    third = spawner.serve(short_dir / "c.sock", db_path)
    third.signal(signal.SIGTERM)
    assert third.wait() == 0


def test_two_executors_on_one_file_are_two_heartbeat_rows(
    spawner: Spawner, short_dir: Path
) -> None:
    """Two executors (two sockets) that have written one file, one after the other, show as two
    heartbeats in ``executor stats``, each naming its socket; a restart on a socket replaces its
    own row."""
    db_path = short_dir / "t.db"
    sockets = [short_dir / "a.sock", short_dir / "b.sock", short_dir / "a.sock"]
    for socket_path in sockets:
        executor = spawner.serve(socket_path, db_path, "--exchange", "fake")
        executor.signal(signal.SIGTERM)
        assert executor.wait() == 0
    shown = spawner.run("stats", "--telemetry-db", db_path, "--json")
    assert shown.returncode == 0, shown.stderr
    beats = json.loads(shown.stdout)["heartbeats"]
    assert sorted(beat["process"] for beat in beats) == [
        f"{HEARTBEAT_PROCESS}:{os.path.abspath(short_dir / name)}" for name in ("a.sock", "b.sock")
    ]
    text = spawner.run("stats", "--telemetry-db", db_path)
    assert "heartbeats: 2" in text.stdout
