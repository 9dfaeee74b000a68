"""The saturation comparator without Trio (``bench.baselines.floor``): it acks, records and decides
what ``executor serve`` would, so its rate is a fair floor (docs/performance/plan, "the floor")."""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.baselines.floor import FloorCounters, RowQueue, _listen
from executor.recording.database import open_database
from executor.recording.rows import wake_recv_row
from executor.wire.protocol import PREFIX_BYTES, decode_wake_ack, encode_frame
from tests.support.inprocess import make_wake


@contextlib.contextmanager
def _floor(directory: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The floor on ``directory/x.sock``, rows in ``t.db``, stderr in ``stderr.txt``; SIGTERM on
    leaving (killed if stuck)."""
    socket_path = directory / "x.sock"
    with (directory / "stderr.txt").open("wb") as stderr_file:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "bench.baselines.floor"),
                *("--socket", str(socket_path), "--telemetry-db", str(directory / "t.db")),
            ],
            stderr=stderr_file,
        )
    try:
        deadline = time.monotonic() + 30
        while not socket_path.exists():
            assert process.poll() is None, "the floor exited during start-up"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        yield process
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _connect(directory: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.settimeout(10)
        client.connect(str(directory / "x.sock"))
    except BaseException:
        client.close()
        raise
    return client


def _read_acks(client: socket.socket, count: int) -> list[tuple[str, str]]:
    """(status, correlation id) of the next ``count`` acks."""
    acks = []
    with client.makefile("rb") as reader:
        for _ in range(count):
            length = int.from_bytes(reader.read(PREFIX_BYTES), "big")
            ack = decode_wake_ack(reader.read(length))
            acks.append((ack.status, ack.correlation_id))
    return acks


def _counters(directory: Path) -> dict[str, int]:
    """The ``key=N`` pairs the floor printed at exit."""
    text = (directory / "stderr.txt").read_text(encoding="utf-8")
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", text)}


def test_pipelined_frames_are_acked_in_order_recorded_and_decided(tmp_path: Path) -> None:
    """Forty pipelined frames in one write, one of them malformed: forty acks in frame order,
    a ``wake_recv`` row and a decision for each accepted one, and counters that agree."""
    ids = [f"floor-{index:03d}" for index in range(40)]
    frames = [encode_frame(make_wake(cid, dry_run=index % 5 != 0)) for index, cid in enumerate(ids)]
    frames[17] = encode_frame({"schema_version": 4, "correlation_id": ids[17]})
    with _floor(tmp_path) as process, _connect(tmp_path) as client:
        client.sendall(b"".join(frames))
        acks = _read_acks(client, len(frames))
    assert process.returncode == 0
    assert [cid for status, cid in acks if status == "accepted"] == ids[:17] + ids[18:]
    assert [status for status, _ in acks].count("rejected") == 1
    assert acks[17][0] == "rejected"
    counters = _counters(tmp_path)
    assert counters["frames"] == 40
    assert counters["accepted"] == counters["decided"] == counters["orders"] == 39
    assert counters["rejected"] == 1
    assert counters["rows_written"] == 39
    assert counters["dropped_ring_full"] == counters["dropped_write_failed"] == 0
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as db:
        rows = db.execute(
            "SELECT correlation_id FROM latency_events WHERE stage = 'wake_recv' ORDER BY id"
        ).fetchall()
    assert [cid for (cid,) in rows] == ids[:17] + ids[18:]


def test_an_oversized_prefix_closes_only_its_connection(tmp_path: Path) -> None:
    """The frames before an oversized prefix are acked; the connection then closes and is
    counted; another connection is served on."""
    with _floor(tmp_path) as process:
        with _connect(tmp_path) as bad:
            bad.sendall(encode_frame(make_wake("before")) + (1 << 30).to_bytes(4, "big"))
            assert _read_acks(bad, 1) == [("accepted", "before")]
            assert bad.recv(1) == b""  # closed by the floor
        with _connect(tmp_path) as good:
            good.sendall(encode_frame(make_wake("after")))
            assert _read_acks(good, 1) == [("accepted", "after")]
    assert process.returncode == 0
    counters = _counters(tmp_path)
    assert counters["oversized_frames"] == 1
    assert counters["rows_written"] == 2


def test_rows_past_the_queue_capacity_are_dropped_and_counted(tmp_path: Path) -> None:
    """The queue holds ``capacity`` rows; the next is counted, not queued; the writer commits
    the rest once closed."""
    counters = FloorCounters()
    rows = RowQueue(counters, capacity=2)
    for index in range(3):
        rows.record(wake_recv_row(f"row-{index}", 1, 2, 1_000, True))
    assert counters.dropped_ring_full == 1
    rows.close()
    connection, _ = open_database(tmp_path / "t.db")
    rows.write_all(connection, tmp_path / "t.db")
    assert counters.rows_written == 2
    with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as db:
        stored = db.execute("SELECT correlation_id FROM latency_events ORDER BY id").fetchall()
    assert stored == [("row-0",), ("row-1",)]


def test_the_socket_path_appears_only_once_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sees the path can connect: when ``listen`` runs, nothing is at the path yet
    (the harness waits for the path, and a bind-then-listen floor refused it once in CI)."""
    socket_path = tmp_path / "x.sock"
    seen_at_listen: list[bool] = []
    real_listen = socket.socket.listen

    def listen(self: socket.socket, backlog: int = 128) -> None:
        seen_at_listen.append(socket_path.exists())
        real_listen(self, backlog)

    monkeypatch.setattr(socket.socket, "listen", listen)
    listener = _listen(str(socket_path))
    with listener, _connect(tmp_path):
        assert seen_at_listen == [False]
        assert stat.S_ISSOCK(socket_path.stat().st_mode)
