"""``frame_waiting``: the hand-off's look for a frame before it starts a held shadow
(``executor.wire.handoff``).

A whole frame buffered, or read whole by the look, is waiting; a cut frame whose rest has not
arrived is not. At the buffer's end (no room left behind a cut frame) the look cannot read: bytes
still in the kernel count as waiting (one peek, nothing copied or moved), so the held shadows stay
held and the connection's next read takes them (issue 34: before, the look read nothing there and
every held shadow started while a burst waited in the kernel). A plain socket pair and a small
buffer stand in for a connection.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from executor.wire.handoff import frame_waiting
from executor.wire.protocol import PREFIX_BYTES

BUFFER_BYTES = 64


def frame(body_bytes: int) -> bytes:
    """A frame of ``body_bytes`` (only its length prefix is read here)."""
    return body_bytes.to_bytes(PREFIX_BYTES, "big") + b"x" * body_bytes


@dataclass
class Buffered:
    """A connection's socket and receive buffer, as ``frame_waiting`` reads them."""

    sock: socket.socket
    storage: bytearray = field(default_factory=lambda: bytearray(BUFFER_BYTES))
    start: int = 0
    end: int = 0

    def __post_init__(self) -> None:
        self.view = memoryview(self.storage)

    def fill(self, data: bytes) -> None:
        """Put ``data`` in the buffer as if the connection had read it."""
        self.view[self.end : self.end + len(data)] = data
        self.end += len(data)


@pytest.fixture
def pair() -> Iterator[tuple[Buffered, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    with ours, peer:
        yield Buffered(ours), peer


def test_a_buffered_frame_is_waiting(pair: tuple[Buffered, socket.socket]) -> None:
    connection, _ = pair
    connection.fill(frame(10))
    assert frame_waiting(connection)


def test_a_frame_in_the_kernel_is_read_and_waiting(pair: tuple[Buffered, socket.socket]) -> None:
    connection, peer = pair
    peer.sendall(frame(10))
    assert frame_waiting(connection)
    assert connection.end == PREFIX_BYTES + 10


def test_nothing_sent_is_nothing_waiting(pair: tuple[Buffered, socket.socket]) -> None:
    connection, _ = pair
    assert not frame_waiting(connection)


def test_a_cut_frame_whose_rest_has_not_arrived_is_not_waiting(
    pair: tuple[Buffered, socket.socket],
) -> None:
    connection, peer = pair
    peer.sendall(frame(20)[:10])
    assert not frame_waiting(connection)
    assert connection.end == 10


def test_bytes_behind_a_full_buffer_count_as_waiting_and_stay_in_the_kernel(
    pair: tuple[Buffered, socket.socket],
) -> None:
    """The buffer full to its end with a cut frame, the rest in the kernel: waiting, and the
    bytes are left for the connection's next read (the peek takes none)."""
    connection, peer = pair
    first, second = frame(40), frame(40)  # 44 + 44 bytes: the second is cut at 64
    connection.fill(first + second[:10])
    connection.start = len(first)  # the first frame handled
    peer.sendall(second[10:])
    assert frame_waiting(connection)  # read 10 bytes to the end, then peeked
    assert connection.end == BUFFER_BYTES
    assert frame_waiting(connection)  # no room at all now: only the peek
    assert connection.sock.recv(100) == second[BUFFER_BYTES - len(first) :]


def test_a_full_buffer_with_nothing_behind_it_is_not_waiting(
    pair: tuple[Buffered, socket.socket],
) -> None:
    connection, peer = pair
    connection.fill(frame(40))
    connection.start = PREFIX_BYTES + 40
    connection.fill(frame(40)[: BUFFER_BYTES - connection.end])  # cut at the end
    assert not frame_waiting(connection)
    peer.close()  # an end of stream behind a full buffer is left for the next read
    assert not frame_waiting(connection)
