"""Peers that vanish: after sending, mid-prefix, mid-body, and while their acks are being written.

AF_UNIX has no RST (``SO_LINGER`` 0 changes nothing), so "reset" here means closing at an awkward
byte. The server must survive each, leave other connections alone, and give back every descriptor,
task and ``connections_open`` count the peer held.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path

import trio
import trio.testing
from conftest import RunningServer, make_wake, start_server

from executor.client import ExecutorClient, connect
from executor.connection import MAX_BATCH_FRAMES
from executor.protocol import encode_frame

SETTLE_TIMEOUT_S = 10.0
"""Upper bound on waiting for the server to notice vanished peers (a hang guard, not a timing)."""

SETTLE_POLL_S = 0.005
"""Polling interval while settling (seconds)."""


def open_fds() -> int:
    """Open file descriptors of this process (server and test clients share it)."""
    return len(os.listdir("/proc/self/fd"))


def describe_fds() -> list[str]:
    """What each open descriptor points at (for a failure message)."""
    described = []
    for fd in os.listdir("/proc/self/fd"):
        # The listing's own descriptor is closed by the time it is read.
        with contextlib.suppress(OSError):
            described.append(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
    return sorted(described, key=lambda item: int(item.split(":")[0]))


def trio_tasks() -> int:
    """Every live Trio task, found by walking the task tree from the root."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    count = 0
    pending = [root]
    while pending:
        task = pending.pop()
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


async def settle(condition: Callable[[], bool], what: str) -> None:
    """Poll (bounded) until ``condition`` holds, letting the server run in between."""
    polls = int(SETTLE_TIMEOUT_S / SETTLE_POLL_S)
    for _ in range(polls):
        if condition():
            return
        await trio.sleep(SETTLE_POLL_S)
    assert condition(), f"did not settle: {what}; open fds: {describe_fds()}"


async def settle_to_baseline(running: RunningServer, fds: int, tasks: int, open_: int) -> None:
    """Wait until descriptors, tasks and open connections are back to the given baseline."""
    await settle(lambda: running.server.statistics().connections_open == open_, "connections")
    await settle(lambda: open_fds() == fds, f"fds {open_fds()} != {fds}")
    await settle(lambda: trio_tasks() == tasks, f"tasks {trio_tasks()} != {tasks}")


def raw_peer(socket_path: Path, data: bytes) -> None:
    """Connect, send ``data``, and close without reading anything."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.connect(str(socket_path))
        peer.sendall(data)


async def warm_up(running: RunningServer, client: ExecutorClient) -> tuple[int, int]:
    """A few round trips and their rows committed (SQLite opens its WAL files on the first
    commit); then the baseline descriptor and task counts."""
    await checked_requests(client, "warm", 3)
    telemetry = running.server.telemetry
    await settle(lambda: telemetry.statistics().rows_written >= 3, "warm-up rows written")
    await trio.testing.wait_all_tasks_blocked()
    return open_fds(), trio_tasks()


async def checked_requests(client: ExecutorClient, label: str, count: int) -> None:
    """``count`` round trips on a well-behaved connection, each accepted with its own id."""
    for index in range(count):
        ack = await client.request(make_wake(f"{label}-{index}"))
        assert (ack.status, ack.correlation_id) == ("accepted", f"{label}-{index}")


async def test_fd_and_task_probes_see_a_live_connection(
    executor_server: RunningServer,
) -> None:
    """The probes are not blind: an open connection shows as two fds, one task, one open count."""
    async with connect(executor_server.socket_path) as warm:
        fds, tasks = await warm_up(executor_server, warm)
        async with connect(executor_server.socket_path) as client:
            await client.request(make_wake("probe"))
            await trio.testing.wait_all_tasks_blocked()
            assert executor_server.server.statistics().connections_open == 2
            assert (open_fds(), trio_tasks()) == (fds + 2, tasks + 1)
        await settle_to_baseline(executor_server, fds, tasks, 1)


async def test_vanishing_peers_leave_no_trace(nursery: trio.Nursery, short_dir: Path) -> None:
    """Peers vanishing at every awkward point cost nothing lasting and disturb no other client."""
    running = await start_server(nursery, short_dir)
    frame = encode_frame(make_wake("vanish"))
    async with connect(running.socket_path) as good:
        fds, tasks = await warm_up(running, good)

        # 1. Flooders: pipeline far more frames than their acks' buffer holds, never read, close
        #    while the server is blocked writing an ack to them (EPIPE/ECONNRESET on that write).
        flooders = [await trio.open_unix_socket(str(running.socket_path)) for _ in range(5)]
        async with trio.open_nursery() as floods:
            for stream in flooders:
                floods.start_soon(stream.send_all, frame * 3000)
            await checked_requests(good, "during-flood", 20)
            await trio.testing.wait_all_tasks_blocked()
            assert running.server.statistics().accepted < 5 * 3000
            floods.cancel_scope.cancel()
        for stream in flooders:
            await stream.aclose()
        await checked_requests(good, "after-flood", 5)

        # 2. Close right after sending: the first ack's write finds the peer gone.
        for _ in range(20):
            raw_peer(running.socket_path, frame * 5)
        # 3. Close mid-prefix and mid-body: no ack is due, nothing is counted.
        for cut in (1, 2, 3, 4, 5, len(frame) // 2, len(frame) - 1):
            for _ in range(5):
                raw_peer(running.socket_path, frame[:cut])
        # 4. Connect and leave at once.
        for _ in range(10):
            raw_peer(running.socket_path, b"")
        await checked_requests(good, "after-all", 5)

        await settle_to_baseline(running, fds, tasks, 1)
        await checked_requests(good, "baseline", 3)

    await running.shutdown()
    stats = running.server.statistics()
    peers = 5 + 20 + 7 * 5 + 10
    assert stats.connections_opened == 1 + peers
    assert stats.connections_open == 0
    # A batch's acks go out in one send (executor/connection.py): when that send finds the peer
    # gone, every frame of the batch is unacked: all 5 of each close-after-send peer (they were
    # buffered before the server read), 1..MAX_BATCH_FRAMES of each flooder.
    assert 5 + 20 * 5 <= stats.unacked <= 5 * MAX_BATCH_FRAMES + 20 * 5
    assert stats.frames == stats.accepted + stats.rejected
    assert stats.rejected == 0
    telemetry = running.server.telemetry.statistics()
    assert telemetry.rows_written == stats.accepted - stats.unacked
    assert stats.fired == stats.accepted - stats.unacked
    print(f"vanishing peers: {peers} peers gone, {stats.unacked} acks failed, nothing leaked")
