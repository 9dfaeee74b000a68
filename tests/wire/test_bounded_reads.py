"""A read of the connection loop buffers at most ``READ_AHEAD_BYTES`` unconsumed bytes, unless one
frame needs more (issue 34): a burst's backlog stays in the kernel and the loop reads again after
~80 frames, not after a whole buffer's ~260.

Over real socket pairs; nothing here is timed: what a read took is the buffer's ``end`` and what
it left is the kernel's queue (``FIONREAD``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from executor.wire.connection import READ_AHEAD_BYTES, RECEIVE_BUFFER_BYTES, Connection
from executor.wire.handoff import frame_waiting
from executor.wire.protocol import MAX_FRAME_BYTES, PREFIX_BYTES, encode_frame
from tests.support.inprocess import make_wake
from tests.wire.test_read_between_batches import queued


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(the executor's non-blocking end, the peer's blocking end, with room for a backlog)."""
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    for end, option in ((ours, socket.SO_RCVBUF), (peer, socket.SO_SNDBUF)):
        end.setsockopt(socket.SOL_SOCKET, option, 4 * RECEIVE_BUFFER_BYTES)
    try:
        yield ours, peer
    finally:
        ours.close()
        peer.close()


def backlog(frames: int) -> bytes:
    """``frames`` wakes written back to back, as a burst leaves them in the kernel."""
    return b"".join(encode_frame(make_wake(f"b{n}", dry_run=True)) for n in range(frames))


def send_in_thread(peer: socket.socket, data: bytes) -> threading.Thread:
    """``peer.sendall(data)`` from a thread (a backlog larger than the socket's queue)."""
    thread = threading.Thread(target=peer.sendall, args=(data,))
    thread.start()
    return thread


async def test_a_read_leaves_a_backlog_past_the_bound_in_the_kernel(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A backlog of three bounds' worth: one read buffers exactly ``READ_AHEAD_BYTES``, the rest
    stays queued in the kernel."""
    ours, peer = pair
    data = backlog(3 * READ_AHEAD_BYTES // len(backlog(1)) + 1)
    peer.sendall(data)
    connection = Connection(ours)
    assert await connection.receive_at_least(PREFIX_BYTES)
    assert (connection.start, connection.end) == (0, READ_AHEAD_BYTES)
    assert queued(ours) == len(data) - READ_AHEAD_BYTES


async def test_a_frame_larger_than_the_bound_is_still_read_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A frame of up to ``MAX_FRAME_BYTES`` (twice the bound) gets all its bytes in one call."""
    ours, peer = pair
    body = b"x" * MAX_FRAME_BYTES
    prefix = len(body).to_bytes(PREFIX_BYTES, "big")
    sender = send_in_thread(peer, prefix + body + backlog(10))
    connection = Connection(ours)
    assert await connection.receive_at_least(PREFIX_BYTES + len(body))
    sender.join()
    assert bytes(connection.buffer[PREFIX_BYTES : PREFIX_BYTES + len(body)]) == body
    assert connection.end == PREFIX_BYTES + len(body)


async def test_a_read_needing_room_moves_only_the_cut_frame(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Near the buffer's end, a read first moves the partial frame to the front, then takes up to
    the bound behind it; the frame's bytes stay in order."""
    ours, peer = pair
    connection = Connection(ours)
    partial = b"\x00\x00\x00\x10abc"  # a 16-byte body, 3 of its bytes here
    connection.start = RECEIVE_BUFFER_BYTES - 1000
    connection.end = connection.start + len(partial)
    connection.buffer[connection.start : connection.end] = partial
    peer.sendall(b"d" * 13 + backlog(200))
    assert await connection.receive_at_least(PREFIX_BYTES + 16)
    assert (connection.start, connection.end) == (0, READ_AHEAD_BYTES)
    assert bytes(connection.buffer[: PREFIX_BYTES + 16]) == partial + b"d" * 13


async def test_frame_waiting_reads_no_further_than_the_bound(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """The hand-off's look for a waiting frame buffers no more than a read of the loop does."""
    ours, peer = pair
    peer.sendall(backlog(3 * READ_AHEAD_BYTES // len(backlog(1))))
    connection = Connection(ours)
    assert frame_waiting(connection)
    assert connection.end - connection.start == READ_AHEAD_BYTES


async def test_frame_waiting_at_the_buffers_end_moves_the_cut_frame_and_reads(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A frame cut at the very end of the buffer: the look moves it to the front and reads the
    rest from the kernel (before, it read nothing there and every held shadow started at once)."""
    ours, peer = pair
    whole = encode_frame(make_wake("cut", dry_run=True))
    connection = Connection(ours)
    connection.start = RECEIVE_BUFFER_BYTES - 10
    connection.end = RECEIVE_BUFFER_BYTES
    connection.buffer[connection.start :] = whole[:10]
    peer.sendall(whole[10:] + backlog(2))
    assert frame_waiting(connection)
    assert connection.start == 0
    assert bytes(connection.buffer[: len(whole)]) == whole
