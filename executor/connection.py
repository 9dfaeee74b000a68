"""One connection's frames: read, stamp, decode, ack, record, fire (SERVICE.md, per frame).

The timed span (``wake_recv``) runs from the stamp taken right after a frame's last byte arrived
to the moment the ack's last byte was handed to the kernel. Inside it there is only decoding,
encoding the ack, and a non-blocking ``send``; the task waits for writability only if the send
would block. The Trio checkpoint every loop iteration owes (cancellation, fairness) is taken after
the span closes: a pipelining connection yields once per frame, so it cannot starve the others.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import structlog
import trio

from executor.logs import RateLimitedWarning
from executor.protocol import (
    MAX_FRAME_BYTES,
    PREFIX_BYTES,
    DecodeError,
    FrameTooLargeError,
    WakeMessage,
    decode_wake_message,
    encode_accepted_ack,
    encode_rejected_ack,
    parse_frame_length,
)
from executor.telemetry import Telemetry, wake_recv_row

log = structlog.get_logger()

RECEIVE_BUFFER_BYTES: Final = 2 * (PREFIX_BYTES + MAX_FRAME_BYTES)
"""One connection's read buffer: room for a whole maximal frame wherever the last one ended."""

_PEER_GONE: Final = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

_oversized_frame_warnings: Final = RateLimitedWarning("oversized frame: closing connection")
_rejected_frame_warnings: Final = RateLimitedWarning("rejected frame")


@dataclass
class FrameCounters:
    """Frame counters shared by every connection of one server (SERVICE.md defines each)."""

    frames: int = 0
    accepted: int = 0
    rejected: int = 0
    unacked: int = 0
    oversized_frames: int = 0


class PeerGone(Exception):
    """The peer closed or reset the connection."""


class Connection:
    """One peer: a non-blocking socket and a fixed receive buffer with exact-length reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray(RECEIVE_BUFFER_BYTES)
        self.view = memoryview(self.buffer)
        self.start = 0  # first unconsumed byte
        self.end = 0  # one past the last received byte
        self.waited = False  # whether this frame's reads went through the scheduler
        self.idle = False  # waiting for the first bytes of a frame

    async def receive_at_least(self, size: int) -> bool:
        """Make ``size`` unconsumed bytes available; False on EOF (clean or mid-frame)."""
        if self.start == self.end:
            self.start = self.end = 0
        elif len(self.buffer) - self.start < size:
            pending = self.end - self.start
            self.buffer[:pending] = self.buffer[self.start : self.end]
            self.start, self.end = 0, pending
        while self.end - self.start < size:
            try:
                received = self.sock.recv_into(self.view[self.end :])
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_readable(self.sock)
                continue
            except _PEER_GONE:
                return False
            if received == 0:
                return False
            self.end += received
        return True

    def send_now(self, data: bytes | memoryview) -> int:
        """One non-blocking ``send`` of ``data``; the bytes the kernel took (0 when it was full).

        The hot path's common case: no coroutine, no scheduler, one system call.

        Raises:
            PeerGone: the peer closed or reset the connection.
        """
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0
        except _PEER_GONE as error:
            raise PeerGone(str(error)) from None

    async def send_all(self, data: bytes, already_sent: int = 0) -> None:
        """Write the rest of ``data`` (from ``already_sent``), waiting for writability as needed.

        Raises:
            PeerGone: the peer closed or reset the connection.
        """
        view = memoryview(data)[already_sent:]
        while view:
            sent = self.send_now(view)
            if sent == 0:
                self.waited = True
                await trio.lowlevel.wait_writable(self.sock)
            view = view[sent:]

    def stop_reading(self) -> None:
        """End an idle wait: the pending read sees end-of-file (used at shutdown)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


async def serve_frames(
    connection: Connection,
    *,
    counters: FrameCounters,
    stats: dict[str, int],
    telemetry: Telemetry,
    start_fire: Callable[[WakeMessage], None],
    stopping: trio.Event,
) -> str:
    """Handle frames until EOF or shutdown; return why the loop ended.

    Args:
        connection: the peer.
        counters: the server-wide frame counters.
        stats: this connection's ``frames``/``accepted``/``rejected`` counts, for its close line.
        telemetry: where ``wake_recv`` rows go (without waiting).
        start_fire: starts the fire of an acked wake as its own task; never blocks.
        stopping: set once shutdown has begun.

    Raises:
        PeerGone: the peer vanished while an ack was being written.

    Cancellation: between frames the wait for the next frame is ended at shutdown by
    ``Connection.stop_reading`` rather than by cancellation (a per-frame CancelScope cost ~7 us
    on the wake-up path); a cancelled ack write counts the frame as ``unacked``.
    """
    perf_ns = time.perf_counter_ns
    wall_ns = time.time_ns
    while True:
        connection.waited = False
        if stopping.is_set():
            return "shutdown"
        connection.idle = True
        try:
            if not await connection.receive_at_least(PREFIX_BYTES):
                return "shutdown" if stopping.is_set() else "eof"
        finally:
            connection.idle = False
        prefix_start = connection.start
        try:
            length = parse_frame_length(
                connection.view[prefix_start : prefix_start + PREFIX_BYTES]
            )
        except FrameTooLargeError as error:
            counters.oversized_frames += 1
            _oversized_frame_warnings.warning(declared=error.declared)
            return "oversized frame"
        if not await connection.receive_at_least(PREFIX_BYTES + length):
            return "eof mid-frame"
        # ---- timed span: stamp -> decode -> ack encode -> ack write ----
        stamp_ns = perf_ns()
        received_at_ms = wall_ns() // 1_000_000
        # Re-read the offset: receiving the body may have compacted the buffer.
        body_start = connection.start + PREFIX_BYTES
        connection.start = body_start + length
        counters.frames += 1
        stats["frames"] += 1
        try:
            message = decode_wake_message(connection.view[body_start : connection.start])
        except DecodeError as error:
            counters.rejected += 1
            stats["rejected"] += 1
            await connection.send_all(encode_rejected_ack(str(error), received_at_ms))
            _rejected_frame_warnings.warning(field=error.field, reason=str(error))
            await _checkpoint_unless_waited(connection)
            continue
        counters.accepted += 1
        stats["accepted"] += 1
        try:
            ack = encode_accepted_ack(message.correlation_id, received_at_ms)
            sent = connection.send_now(ack)
            if sent < len(ack):
                await connection.send_all(ack, sent)
        except BaseException:
            counters.unacked += 1
            raise
        done_ns = perf_ns()
        # ---- span closed ----
        telemetry.record(
            wake_recv_row(
                message.correlation_id,
                received_at_ms,
                wall_ns() // 1_000_000,
                done_ns - stamp_ns,
                message.dry_run,
            )
        )
        start_fire(message)
        await _checkpoint_unless_waited(connection)


async def _checkpoint_unless_waited(connection: Connection) -> None:
    # Every frame passes through the scheduler once; a frame whose reads already waited did.
    if not connection.waited:
        await trio.lowlevel.checkpoint()
