"""``frame_waiting``: the hand-off's look for a frame before it starts a held shadow
(``executor.wire.handoff``).

A whole frame buffered, or read whole by the look, is waiting; a cut frame whose rest has not
arrived is not, nor is an end of stream. At the buffer's end (no room left behind a cut frame) the
look reads nothing and says no frame waits, even with bytes in the kernel: the held shadows start
then (a known cost, ~1-2 ms per 128 KiB once the loop has fallen behind; asking the kernel instead
cost one connection flat out 0.91x of its rows/s: docs/performance/notebook/ 2026-12-06, third
pass). A plain socket pair and a small buffer stand in for a connection.
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


def test_an_end_of_stream_is_not_waiting(pair: tuple[Buffered, socket.socket]) -> None:
    """The peer gone: nothing to handle now; the connection's next read sees the end again."""
    connection, peer = pair
    peer.close()
    assert not frame_waiting(connection)
    assert connection.sock.recv(1) == b""
