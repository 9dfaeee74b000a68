"""The connection loop's batches: frames already buffered are handled together, fairly, in order.

Clients here write with plain non-blocking sockets, synchronously, so every byte is in the
server's socket buffer before the server task runs again: what the server finds in one read is
decided by the test, not by timing.
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio
import trio.testing

from executor.fire.path import FirePath, FireRequest
from executor.wire.connection import MAX_BATCH_FRAMES
from executor.wire.protocol import MAX_FRAME_BYTES, decode_wake_ack, encode_frame
from tests.support.inprocess import RunningServer, make_wake, start_server

WAIT_S = 10.0
"""Bound on every wait (seconds); generous for a loaded machine, never a speed claim."""


@contextmanager
def raw_client(running: RunningServer) -> Iterator[socket.socket]:
    """A connected non-blocking plain socket (writes never yield to the server)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(running.socket_path))
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def send_whole(sock: socket.socket, data: bytes) -> None:
    """Hand all of ``data`` to the kernel in one call, or fail the test (it must be buffered)."""
    assert sock.send(data) == len(data)


async def read_acks(sock: socket.socket, count: int) -> list[tuple[str, str]]:
    """Read ``count`` acks; (status, correlation_id) of each, in arrival order."""
    buffer = b""
    acks: list[tuple[str, str]] = []
    while len(acks) < count:
        while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
            end = 4 + int.from_bytes(buffer[:4], "big")
            ack = decode_wake_ack(buffer[4:end])
            acks.append((ack.status, ack.correlation_id))
            buffer = buffer[end:]
        if len(acks) >= count:
            break
        await trio.lowlevel.wait_readable(sock)
        chunk = sock.recv(65536)
        assert chunk, "the executor closed the connection"
        buffer += chunk
    return acks


def frames(prefix: str, count: int) -> bytes:
    """``count`` valid wakes ``prefix0`` .. written back to back."""
    return b"".join(encode_frame(make_wake(f"{prefix}{i}")) for i in range(count))


def row_ids_and_durations(db_path: Path) -> list[tuple[str, float]]:
    """Every wake_recv row's (correlation_id, duration_ms), in insertion order."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return db.execute(
            "SELECT correlation_id, duration_ms FROM latency_events"
            " WHERE stage = 'wake_recv' ORDER BY id"
        ).fetchall()


async def test_pipelining_connection_yields_to_another(executor_server: RunningServer) -> None:
    """A connection with hundreds of frames buffered does not make another wait for all of them."""
    pipelined = 300
    with raw_client(executor_server) as busy, raw_client(executor_server) as single:
        await trio.testing.wait_all_tasks_blocked()
        send_whole(busy, frames("busy", pipelined))
        send_whole(single, encode_frame(make_wake("single")))
        with trio.fail_after(WAIT_S):
            assert await read_acks(single, 1) == [("accepted", "single")]
        # One batch per scheduler pass: a few passes have run, not the whole pipeline.
        handled = executor_server.server.statistics().frames
        assert handled <= 1 + 4 * MAX_BATCH_FRAMES < 1 + pipelined
        with trio.fail_after(WAIT_S):
            acks = await read_acks(busy, pipelined)
    assert acks == [("accepted", f"busy{i}") for i in range(pipelined)]


async def test_frame_cut_at_buffer_end_does_not_hold_back_earlier_acks(
    executor_server: RunningServer,
) -> None:
    """Complete frames ahead of a half-received one are acked before its rest arrives."""
    last = encode_frame(make_wake("cut3"))
    with raw_client(executor_server) as client:
        send_whole(client, frames("cut", 3) + last[: len(last) // 2])
        with trio.fail_after(WAIT_S):
            first = await read_acks(client, 3)
        send_whole(client, last[len(last) // 2 :])
        with trio.fail_after(WAIT_S):
            rest = await read_acks(client, 1)
    assert first + rest == [("accepted", f"cut{i}") for i in range(4)]


async def test_prefix_cut_at_buffer_end_does_not_hold_back_earlier_acks(
    executor_server: RunningServer,
) -> None:
    """Complete frames ahead of a two-byte prefix fragment are acked before the rest arrives."""
    last = encode_frame(make_wake("p2"))
    with raw_client(executor_server) as client:
        send_whole(client, frames("p", 2) + last[:2])
        with trio.fail_after(WAIT_S):
            first = await read_acks(client, 2)
        send_whole(client, last[2:])
        with trio.fail_after(WAIT_S):
            rest = await read_acks(client, 1)
    assert first + rest == [("accepted", f"p{i}") for i in range(3)]


async def test_rejected_frame_inside_a_batch_keeps_ack_order(
    executor_server: RunningServer,
) -> None:
    """A bad body between good ones gets its rejected ack in its place; rows are the good ones."""
    data = frames("a", 2) + encode_frame({"wat": 1}) + frames("b", 2)
    with raw_client(executor_server) as client:
        send_whole(client, data)
        with trio.fail_after(WAIT_S):
            acks = await read_acks(client, 5)
    assert acks == [
        ("accepted", "a0"),
        ("accepted", "a1"),
        ("rejected", ""),
        ("accepted", "b0"),
        ("accepted", "b1"),
    ]
    await executor_server.shutdown()
    stats = executor_server.server.statistics()
    assert (stats.frames, stats.accepted, stats.rejected, stats.unacked) == (5, 4, 1, 0)
    assert [cid for cid, _ in row_ids_and_durations(executor_server.db_path)] == [
        "a0",
        "a1",
        "b0",
        "b1",
    ]


async def test_oversized_prefix_after_good_frames_acks_them_then_closes(
    executor_server: RunningServer,
) -> None:
    """Frames buffered before an oversized prefix are acked and recorded, then the peer closed."""
    data = frames("ok", 2) + (MAX_FRAME_BYTES + 1).to_bytes(4, "big")
    with raw_client(executor_server) as client:
        send_whole(client, data)
        with trio.fail_after(WAIT_S):
            assert await read_acks(client, 2) == [("accepted", "ok0"), ("accepted", "ok1")]
            await trio.lowlevel.wait_readable(client)
        assert client.recv(1) == b""
    await executor_server.shutdown()
    stats = executor_server.server.statistics()
    assert (stats.frames, stats.accepted, stats.oversized_frames) == (2, 2, 1)
    assert len(row_ids_and_durations(executor_server.db_path)) == 2


async def test_a_batched_frame_span_ends_at_its_own_ack(executor_server: RunningServer) -> None:
    """Frames of one batch each get a row, in order, whether or not the spans grow or shrink."""
    count = 10
    with raw_client(executor_server) as client:
        send_whole(client, frames("s", count))
        with trio.fail_after(WAIT_S):
            assert await read_acks(client, count) == [("accepted", f"s{i}") for i in range(count)]
    await executor_server.shutdown()
    rows = row_ids_and_durations(executor_server.db_path)
    assert [cid for cid, _ in rows] == [f"s{i}" for i in range(count)]
    assert all(duration > 0 for _, duration in rows)


async def test_every_fire_of_a_batch_is_dispatched_once(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """Each frame of a batch gets its own fire (Trio may run a batch's fire tasks in any order)."""
    seen: list[str] = []

    async def dispatcher(request: FireRequest) -> None:
        seen.append(request.correlation_id)

    running = await start_server(nursery, short_dir, fire_path=FirePath(dispatcher=dispatcher))
    count = 20
    with raw_client(running) as client:
        send_whole(client, frames("f", count))
        with trio.fail_after(WAIT_S):
            await read_acks(client, count)
        await trio.testing.wait_all_tasks_blocked()
    await running.shutdown()
    assert sorted(seen) == sorted(f"f{i}" for i in range(count))
    assert running.server.statistics().fired == count
