"""Shutdown of the real executor process while connections pipeline frames at it.

Each load connection has a sender thread pipelining frames and a reader thread recording every
ack (``bench.clients.soak.PipelinedClient``); the executor is ``python -m executor serve``.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from bench.clients.soak import PipelinedClient, wake_frame
from bench.scenarios.soak_process import (
    EXIT_SLACK_S,
    ExecutorProcess,
    identity_problems,
    ids_with_prefix,
    parse_exit_counters,
    wake_recv_count,
)

GRACE_S = 2.0


def wait_for_acks(clients: list[PipelinedClient], count: int, timeout_s: float = 20.0) -> None:
    """Poll until the clients together hold ``count`` acks (a bound on a hang, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while sum(len(client.acked_ids) for client in clients) < count:
        assert time.monotonic() < deadline, "load never reached the executor"
        time.sleep(0.01)


def signal_under_load(
    directory: Path, signum: int, *, connections: int, acks_before_signal: int
) -> None:
    """Signal the executor mid-load and check the exit, the counters, the rows and the acks."""
    db_path = directory / "t.db"
    executor = ExecutorProcess(directory / "x.sock", db_path, grace_s=GRACE_S)
    executor.wait_ready()
    clients = [
        PipelinedClient(executor.socket_path, f"load-{k:02d}-").start() for k in range(connections)
    ]
    wait_for_acks(clients, acks_before_signal)

    status = executor.stop(signum)
    for client in clients:
        client.join()

    assert status == 0, executor.stderr_text()[-2000:]
    counters = executor.counters()
    assert identity_problems(counters) == []
    assert [client.error for client in clients] == [None] * connections
    # Every frame read was acked and its ack reached a client still reading: none lost on the way.
    acked = [cid for client in clients for cid in client.acked_ids]
    assert counters["unacked"] == 0
    assert len(acked) == counters["accepted"] - counters["unacked"]
    assert len(acked) >= acks_before_signal
    # Every acked frame's row was committed before the exit.
    assert wake_recv_count(db_path) == counters["rows_written"]
    dropped = counters["dropped_ring_full"] + counters["dropped_write_failed"]
    present = ids_with_prefix(db_path, "load-")
    assert sum(1 for cid in acked if cid not in present) <= dropped
    if dropped == 0:
        assert present == set(acked)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_under_load_exits_zero_with_every_frame_accounted(
    short_dir: Path, signum: int
) -> None:
    """A signal during four-connection load ends in exit 0, whole counters, and a row per ack."""
    signal_under_load(short_dir, signum, connections=4, acks_before_signal=2000)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_under_heavy_load_exits_zero_with_every_frame_accounted(
    short_dir: Path, signum: int
) -> None:
    """The same with sixteen connections and a hundred thousand frames acked before the signal."""
    signal_under_load(short_dir, signum, connections=16, acks_before_signal=100_000)


def test_second_signal_cuts_a_long_grace_short(short_dir: Path) -> None:
    """A frame left half-sent holds a 60 s grace open; a second SIGTERM ends it with exit 0."""
    executor = ExecutorProcess(short_dir / "x.sock", short_dir / "t.db", grace_s=60.0)
    executor.wait_ready()
    held = wake_frame("held")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.connect(str(executor.socket_path))
        # One whole frame and the prefix plus half the body of the next, in one write: once the
        # first ack is back the executor is (within a few instructions) waiting for that body.
        peer.sendall(wake_frame("whole") + held[: len(held) // 2])
        assert peer.recv(4096)
        time.sleep(0.2)  # cross-process margin for those instructions; a miss fails, never passes
        executor.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10.0
        while executor.socket_path.exists():  # the listener is closed: shutdown has begun
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert executor.wait(1.0) is None, "shutdown did not wait for the half-read frame"

        executor.send_signal(signal.SIGTERM)
        status = executor.wait(EXIT_SLACK_S)

    assert status == 0, executor.stderr_text()[-2000:]
    counters = executor.counters()
    assert identity_problems(counters) == []
    assert (counters["frames"], counters["accepted"], counters["rows_written"]) == (1, 1, 1)


def test_one_signal_with_a_half_sent_frame_waits_out_the_grace(short_dir: Path) -> None:
    """With a short grace, one signal ends a half-sent frame's wait once the grace runs out."""
    executor = ExecutorProcess(short_dir / "x.sock", short_dir / "t.db", grace_s=0.5)
    executor.wait_ready()
    held = wake_frame("held")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.connect(str(executor.socket_path))
        peer.sendall(wake_frame("whole") + held[: len(held) // 2])
        assert peer.recv(4096)
        time.sleep(0.2)
        status = executor.stop(signal.SIGTERM)
    assert status == 0
    assert executor.counters()["accepted"] == 1


def test_counter_parsing_needs_both_lines() -> None:
    """The exit-line parser refuses output missing either counter line (a crash prints neither)."""
    frames = "frames=1 accepted=1 rejected=0 fired=1 refused_price=0 refused_kill_switch=0"
    frames += " unacked=0 fires_cancelled=0 fire_errors=0"
    telemetry = (
        "telemetry rows_written=1 dropped_ring_full=0 dropped_oversized_id=0 dropped_write_failed=0"
    )
    counters = parse_exit_counters(f'{{"event": "log"}}\n{frames}\n{telemetry}\n')
    assert identity_problems(counters) == []
    with pytest.raises(ValueError):
        parse_exit_counters(frames)
    with pytest.raises(ValueError):
        parse_exit_counters(telemetry)


def test_identity_check_catches_a_lost_row_and_a_lost_fire() -> None:
    """Negative twin: a row or a fire missing from the counters is reported, not passed."""
    healthy = {
        "frames": 10,
        "accepted": 9,
        "rejected": 1,
        "fired": 7,
        "refused_price": 1,
        "refused_kill_switch": 0,
        "unacked": 1,
        "fires_cancelled": 2,
        "fire_errors": 1,
        "rows_written": 6,
        "dropped_ring_full": 1,
        "dropped_oversized_id": 1,
        "dropped_write_failed": 0,
    }
    assert identity_problems(healthy) == []
    assert len(identity_problems({**healthy, "rows_written": 5})) == 1
    assert len(identity_problems({**healthy, "fired": 6})) == 1
    assert len(identity_problems({**healthy, "frames": 11})) == 1
