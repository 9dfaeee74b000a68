"""SIGKILL under load, then a restart on the same paths: it starts, serves, and the file is sound.

The clients record every ack; after the restarted executor's orderly exit the acked ids missing
from the database are counted and printed (run with ``-s`` to see the figure). The executor acks
before it queues the row, so a SIGKILL loses what was queued or in an uncommitted batch.
"""

from __future__ import annotations

import signal
import socket
import stat
import time
from pathlib import Path

import pytest

from bench.clients.soak import PipelinedClient, read_ack_id, wake_frame
from bench.scenarios.soak import LOSS_BOUND_ROWS
from bench.scenarios.soak_process import (
    ExecutorProcess,
    identity_problems,
    ids_with_prefix,
    integrity_check,
)


def crash_and_restart(directory: Path, *, connections: int, acks_before_kill: int) -> int:
    """Kill an executor mid-load, restart it, and return how many acked rows are missing."""
    socket_path, db_path = directory / "x.sock", directory / "t.db"
    executor = ExecutorProcess(socket_path, db_path)
    executor.wait_ready()
    # Paced below the writer's throughput, so no row is dropped for a full channel: every missing
    # row is then one the SIGKILL took (queued or uncommitted), which is what the bound is about.
    clients = [
        PipelinedClient(socket_path, f"crash-{k:02d}-", frames_per_s=1000.0).start()
        for k in range(connections)
    ]
    deadline = time.monotonic() + 60.0
    while sum(len(client.acked_ids) for client in clients) < acks_before_kill:
        assert time.monotonic() < deadline, "load never reached the executor"
        time.sleep(0.01)

    executor.kill()
    for client in clients:
        client.join()
    acked = [cid for client in clients for cid in client.acked_ids]
    assert [client.error for client in clients] == [None] * connections
    assert stat.S_ISSOCK(socket_path.stat().st_mode), "the killed executor left no stale socket"

    restarted = ExecutorProcess(socket_path, db_path)
    restarted.wait_ready()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.connect(str(socket_path))
        peer.sendall(wake_frame("after-restart"))
        assert read_ack_id(peer, bytearray()) == ("accepted", "after-restart")
    assert restarted.stop(signal.SIGTERM) == 0
    assert identity_problems(restarted.counters()) == []

    assert integrity_check(db_path) == "ok"
    assert "after-restart" in ids_with_prefix(db_path, "after-")
    present = ids_with_prefix(db_path, "crash-")
    assert present <= set(acked), "a row exists for a frame no client saw acked"
    missing = sum(1 for cid in acked if cid not in present)
    print(f"\nSIGKILL: {len(acked)} frames acked, {missing} of their rows missing after restart")
    return missing


def test_sigkill_under_load_then_restart_loses_at_most_the_queue(short_dir: Path) -> None:
    """After SIGKILL the restart serves, the file passes integrity_check, and few rows are lost."""
    missing = crash_and_restart(short_dir, connections=4, acks_before_kill=4000)
    assert missing <= LOSS_BOUND_ROWS


@pytest.mark.slow
def test_sigkill_under_long_load_then_restart_loses_at_most_the_queue(short_dir: Path) -> None:
    """The same after sixty thousand acked frames over eight connections."""
    missing = crash_and_restart(short_dir, connections=8, acks_before_kill=60_000)
    assert missing <= LOSS_BOUND_ROWS
