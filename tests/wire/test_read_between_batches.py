"""The connection loop reads between batches (issue 34): what the kernel holds joins the buffer
before each batch after the first, while frames from the last read are still buffered, when the
telemetry writer keeps up (a burst: ``Telemetry.writer_keeping_up``) or when asked
(``--read-between-batches``); with the writer behind (a flood) and not asked, it does not.

Over real socket pairs; nothing here is timed: the kernel's queue is read with ``FIONREAD`` at the
moment a fire starts.
"""

from __future__ import annotations

import array
import fcntl
import os
import socket
import termios
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import trio

from executor.telemetry import Telemetry
from executor.wire.connection import (
    RECEIVE_BUFFER_BYTES,
    TOP_UP_ROOM,
    Connection,
    FrameCounters,
    serve_frames,
)
from executor.wire.protocol import WakeMessage, encode_frame
from tests.support.inprocess import make_wake, start_server
from tests.wire.test_batch_acks import RecordingTelemetry


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the executor's non-blocking end, the peer's blocking end)."""
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    try:
        yield ours, peer
    finally:
        ours.close()
        peer.close()


def queued(sock: socket.socket) -> int:
    """Bytes the kernel holds for ``sock`` to read."""
    count = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, count)
    return count[0]


def frame(name: str, *, dry_run: bool = False) -> bytes:
    return encode_frame(make_wake(name, dry_run=dry_run))


async def test_top_up_takes_the_kernels_bytes_behind_the_unconsumed_ones(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """With a frame still buffered, a top-up reads what arrived since, behind it, in order."""
    ours, peer = pair
    first, second, third = frame("a"), frame("b"), frame("c")
    peer.sendall(first + second)
    connection = Connection(ours)
    assert await connection.receive_at_least(len(first) + len(second))
    connection.start = len(first)  # the first frame was handled
    peer.sendall(third)
    connection.top_up()
    assert queued(ours) == 0
    assert bytes(connection.buffer[connection.start : connection.end]) == second + third


async def test_top_up_leaves_an_empty_buffer_to_the_next_read(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Nothing unconsumed: the bytes stay in the kernel for the loop's own read."""
    ours, peer = pair
    connection = Connection(ours)
    peer.sendall(frame("a"))
    connection.top_up()
    assert (connection.start, connection.end) == (0, 0)
    assert queued(ours) == len(frame("a"))


async def test_top_up_moves_the_unconsumed_bytes_to_the_front_when_room_is_short(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Less than ``TOP_UP_ROOM`` free at the end: the pending bytes move to the front first, and
    the new ones land behind them."""
    ours, peer = pair
    connection = Connection(ours)
    pending = b"p" * 100
    connection.end = RECEIVE_BUFFER_BYTES - TOP_UP_ROOM + 1
    connection.start = connection.end - len(pending)
    connection.buffer[connection.start : connection.end] = pending
    peer.sendall(b"new")
    connection.top_up()
    assert connection.start == 0
    assert bytes(connection.buffer[: connection.end]) == pending + b"new"


async def test_top_up_with_nothing_in_the_kernel_or_a_gone_peer_changes_nothing(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """An empty kernel queue, then an end of stream: the buffer is as it was both times."""
    ours, peer = pair
    peer.sendall(frame("a") + b"\x00")
    connection = Connection(ours)
    assert await connection.receive_at_least(len(frame("a")) + 1)
    connection.start = len(frame("a"))
    before = (connection.start, connection.end)
    connection.top_up()
    peer.close()
    connection.top_up()
    assert (connection.start, connection.end) == before


async def serve_three_real_wakes(
    pair: tuple[socket.socket, socket.socket],
    *,
    reads_between_batches: bool,
    writer_keeping_up: bool = False,
) -> tuple[list[str], list[int]]:
    """Two real wakes read at once (each real wake is a batch of its own), a third written while
    the first fires: the fires, and the bytes the kernel held for the executor at each."""
    ours, peer = pair
    peer.sendall(frame("r1") + frame("r2"))
    fired: list[str] = []
    queued_at_fire: list[int] = []

    def start_fire(message: WakeMessage, *_: int) -> None:
        fired.append(message.correlation_id)
        queued_at_fire.append(queued(ours))
        if message.correlation_id == "r1":
            peer.sendall(frame("r3"))
        elif message.correlation_id == "r3":
            peer.shutdown(socket.SHUT_WR)

    ended = await serve_frames(
        Connection(ours, reads_between_batches=reads_between_batches),
        counters=FrameCounters(),
        stats={"frames": 0, "accepted": 0, "rejected": 0},
        telemetry=cast(Telemetry, RecordingTelemetry(keeping_up=writer_keeping_up)),
        start_fire=start_fire,
        stopping=trio.Event(),
    )
    assert ended == "eof"
    return fired, queued_at_fire


async def test_the_loop_reads_what_arrived_before_handling_the_next_buffered_frame(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Reading between batches: by the time the second wake fires, the third has left the kernel
    (it is in the buffer), and the fires keep frame order."""
    fired, queued_at_fire = await serve_three_real_wakes(pair, reads_between_batches=True)
    assert fired == ["r1", "r2", "r3"]
    assert queued_at_fire == [0, 0, 0]


async def test_while_the_writer_keeps_up_the_loop_reads_between_batches_unasked(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Not asked, the writer keeping up (a burst): the third wake has left the kernel by the time
    the second fires."""
    fired, queued_at_fire = await serve_three_real_wakes(
        pair, reads_between_batches=False, writer_keeping_up=True
    )
    assert fired == ["r1", "r2", "r3"]
    assert queued_at_fire == [0, 0, 0]


async def test_with_the_writer_behind_the_loop_reads_only_once_the_buffer_is_worked_through(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Not asked, the writer behind (a flood): the third wake waits in the kernel while the
    second, already buffered, fires."""
    fired, queued_at_fire = await serve_three_real_wakes(pair, reads_between_batches=False)
    assert fired == ["r1", "r2", "r3"]
    assert queued_at_fire == [0, len(frame("r3")), 0]


@pytest.mark.parametrize("asked", [True, False])
async def test_the_server_hands_its_setting_to_each_connection(
    nursery: trio.Nursery, short_dir: Path, asked: bool
) -> None:
    """``ServerConfig.read_between_batches`` (``--read-between-batches``) reaches the served
    connection's loop; off by default."""
    if asked:
        running = await start_server(nursery, short_dir, read_between_batches=True)
    else:
        running = await start_server(nursery, short_dir)
    stream = await trio.open_unix_socket(os.fspath(running.socket_path))
    await stream.send_all(frame("s", dry_run=True))
    await stream.receive_some(4096)  # its ack: the connection is being served
    connections = list(running.server._connections)
    await stream.aclose()
    await running.shutdown()
    assert [connection.reads_between_batches for connection in connections] == [asked]
