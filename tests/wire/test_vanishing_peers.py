"""Peers that vanish: after sending, mid-prefix, mid-body, and while their acks are being written.

AF_UNIX has no RST (``SO_LINGER`` 0 changes nothing), so "reset" here means closing at an awkward
byte. The server must survive each, leave other connections alone, and give back every descriptor,
task and ``connections_open`` count the peer held.
"""

from __future__ import annotations

import socket
from pathlib import Path

import trio
import trio.testing

from executor.wire.client import connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import RunningServer, make_wake, start_server
from tests.support.probes import (
    checked_requests,
    opened_since,
    settle_to_baseline,
    trio_tasks,
    warm_up,
)


def raw_peer(socket_path: Path, data: bytes) -> None:
    """Connect, send ``data``, and close without reading anything."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.connect(str(socket_path))
        peer.sendall(data)


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
            assert (opened_since(fds), trio_tasks()) == (2, tasks + 1)
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
    # Each ack of a batch is its own send (executor/wire/connection.py): the first send that finds
    # the peer gone ends the batch with that one frame unacked, and the frames behind it are
    # dropped with the connection undecoded. So exactly one per close-after-send peer, and one per
    # flooder whose ack write was still waiting when it closed (at most all five).
    assert 20 <= stats.unacked <= 20 + 5
    assert stats.frames == stats.accepted + stats.rejected
    assert stats.rejected == 0
    telemetry = running.server.telemetry.statistics()
    assert telemetry.rows_written == stats.accepted - stats.unacked
    assert stats.fired == stats.accepted - stats.unacked
    print(f"vanishing peers: {peers} peers gone, {stats.unacked} acks failed, nothing leaked")
