"""Many concurrent connections, each pipelining frames: every ack arrives, in order per connection.

Also a single connection pipelining a stream longer than the server's receive buffer, so frames
straddle the buffer's end and the buffer is compacted mid-frame.
"""

from __future__ import annotations

import resource
import socket
from pathlib import Path

import pytest
import trio

from executor.wire.client import ExecutorClient, connect
from executor.wire.connection import RECEIVE_BUFFER_BYTES
from executor.wire.protocol import encode_frame
from tests.support.inprocess import RunningServer, make_wake


def ensure_fd_limit(needed: int) -> None:
    """Raise the soft RLIMIT_NOFILE to ``needed`` (skip if the hard limit is lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


async def hold_connections(running: RunningServer, connections: int, frames_each: int) -> int:
    """Open ``connections`` connections at once, each held open until all have their acks.

    Returns ``connections_open`` as the server reported it while all of them were held.
    """
    all_acked = trio.Event()
    remaining = connections
    open_at_peak = -1

    async def one(index: int, stream: trio.SocketStream) -> None:
        nonlocal remaining, open_at_peak
        client = ExecutorClient(stream)
        try:
            ids = [f"m{index}-{i}" for i in range(frames_each)]
            await client.send_raw(b"".join(encode_frame(make_wake(cid)) for cid in ids))
            acks = [await client.receive_ack() for _ in ids]
            assert [(a.status, a.correlation_id) for a in acks] == [("accepted", c) for c in ids]
            remaining -= 1
            if remaining == 0:
                open_at_peak = running.server.statistics().connections_open
                all_acked.set()
            await all_acked.wait()
        finally:
            await client.aclose()

    # Trio's AF_UNIX connect mistakes a full listen backlog (EAGAIN) for "in progress" and the
    # connection then fails with ENOTCONN, so connections are opened one after another (the
    # accept loop keeps up), and only then used all at once.
    async with trio.open_nursery() as clients:
        for index in range(connections):
            stream = await trio.open_unix_socket(str(running.socket_path))
            clients.start_soon(one, index, stream)
    return open_at_peak


async def run_many(running: RunningServer, connections: int, frames_each: int) -> None:
    """Hold ``connections`` pipelining connections and check the server's counts."""
    ensure_fd_limit(2 * connections + 256)  # client and server ends share this process
    open_at_peak = await hold_connections(running, connections, frames_each)
    stats = running.server.statistics()
    assert open_at_peak == connections
    assert stats.accepted == stats.frames == connections * frames_each
    assert stats.connections_opened == connections
    print(f"held {connections} connections x {frames_each} pipelined frames, all acked in order")


async def test_256_connections_pipelining(executor_server: RunningServer) -> None:
    """256 connections open at once, 20 pipelined frames each: all acked, in order, all counted."""
    await run_many(executor_server, 256, 20)


@pytest.mark.slow
async def test_1000_connections_pipelining(executor_server: RunningServer) -> None:
    """1,000 connections open at once, 50 pipelined frames each: all acked, in order."""
    await run_many(executor_server, 1000, 50)


def write_whole_stream(socket_path: Path, stream: bytes) -> socket.socket:
    """Connect and write ``stream`` before the server runs at all (it fits the kernel's buffer),
    so the server's first read fills its receive buffer to the end."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(socket_path))
    sock.sendall(stream)
    return sock


async def test_pipelined_stream_longer_than_receive_buffer(executor_server: RunningServer) -> None:
    """Valid frames pipelined past the receive buffer's end are all accepted, in order.

    Regression: the reader once decoded a frame cut by the buffer's end at its pre-compaction
    offset (a wrongly rejected frame, then BufferError and a closed connection).
    """
    # Eight frame sizes, so that for at least seven the buffer's end falls inside a body
    # (a prefix cut by the end takes another path through the reader).
    for padding in range(8):
        ids = [f"long-{'x' * padding}-{i:04d}" for i in range(300)]
        stream = b"".join(encode_frame(make_wake(cid)) for cid in ids)
        assert RECEIVE_BUFFER_BYTES < len(stream) < RECEIVE_BUFFER_BYTES + 20_000
        sock = write_whole_stream(executor_server.socket_path, stream)
        client = ExecutorClient(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
        try:
            acks = [await client.receive_ack() for _ in ids]
        finally:
            await client.aclose()
        assert [(a.status, a.correlation_id) for a in acks] == [("accepted", c) for c in ids]
    assert executor_server.server.statistics().rejected == 0


async def test_pipelined_stream_within_receive_buffer(executor_server: RunningServer) -> None:
    """Twin of the above inside one receive buffer: no compaction, passes even without the fix
    (c478055), so the test above is what pins the buffer's end."""
    ids = [f"short-{i}" for i in range(100)]
    stream = b"".join(encode_frame(make_wake(cid)) for cid in ids)
    assert len(stream) < RECEIVE_BUFFER_BYTES
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(stream)
        acks = [await client.receive_ack() for _ in ids]
    assert [(a.status, a.correlation_id) for a in acks] == [("accepted", c) for c in ids]
