"""One connection's frames: read, stamp, decode, ack, record, fire (SERVICE.md, per frame).

Frames are handled in **batches**: after a read, every frame already complete in the receive
buffer (at most ``MAX_BATCH_FRAMES``) is stamped, decoded, its ack encoded and handed to the kernel
in its own non-blocking ``send``, one frame after the other, with no scheduler pass in between;
then the batch's real wakes are fired (a real order is decided and written right there), then each
acked frame's ``wake_recv`` row is recorded, and the shadow fires are started once no further
whole frame is waiting (``executor.wire.handoff``: the order, and why); then the loop takes one
Trio checkpoint (cancellation, fairness), skipped when the batch's reads already waited in the
scheduler. A paced peer (one frame at a time) makes batches of one, exactly the per-frame loop. A
frame cut at the buffer's end ends the batch: the acks before it are already out. An ack the
kernel does not take whole ends the batch too: the task waits for writability to send its rest,
and the frames behind it stay buffered for the next batch. A pipelining connection yields once per
batch, so it delays the others by at most one batch's work.

The timed span (``wake_recv``) of a frame starts when its handling starts (its bytes are in the
buffer: after the body read) and ends when the last byte of **its own** ack was handed to the
kernel. It contains the frame's strict decode (``decode_wake``: every check of the protocol), its
ack encoding and its ``send``, in a batch as in a batch of one; the later frames of its batch are
decoded after its span closed, and the frozen ``WakeMessage`` the fire takes is built from the
decoded wake after the batch's acks are out (``wake_message_of``, ~1 µs). No fire work of any frame
of the batch has started before the batch's last ack is out.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from typing import Final

import trio

from executor.logs import RateLimitedWarning
from executor.telemetry import Telemetry, wake_recv_row
from executor.wire.handoff import FireHandoff, StartFire, frame_waiting
from executor.wire.protocol import (
    MAX_FRAME_BYTES,
    PREFIX_BYTES,
    DecodedWake,
    DecodeError,
    FrameTooLargeError,
    decode_wake,
    encode_accepted_ack,
    encode_rejected_ack,
    parse_frame_length,
)

RECEIVE_BUFFER_BYTES: Final = 2 * (PREFIX_BYTES + MAX_FRAME_BYTES)
"""One connection's read buffer: room for a whole maximal frame wherever the last one ended."""

MAX_BATCH_FRAMES: Final = 32
"""Most buffered frames handled between two checkpoints (frames). One scheduler pass and one batch
of rows and fires per this many pipelined frames instead of per frame; at ~10 µs of work a frame,
another connection waits at most a few hundred µs for its turn. A guess, measured in
docs/RESULTS.md (2026-11-30)."""

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
    start_fire: StartFire,
    stopping: trio.Event,
) -> str:
    """Handle frames until EOF or shutdown; return why the loop ended.

    Frames already complete in the receive buffer are handled as one batch of at most
    ``MAX_BATCH_FRAMES``: each is stamped, decoded, its ack encoded and sent in turn, then the rows
    are recorded and the fires started, then the loop takes its one checkpoint. A frame cut at the
    buffer's end, or an ack the kernel did not take whole, closes the batch.

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
    on the wake-up path). The only wait inside a batch is for writability, for the one ack the
    kernel did not take whole: cancelled there, that frame is counted ``unacked``; the frames
    before it were handed over and get their row and fire; the frames after it were never
    decoded and are dropped with the connection, uncounted like any half-read frame.
    """
    batch = _Batch()
    handoff = FireHandoff(start_fire)
    try:
        return await _serve_batches(
            connection, batch, handoff, counters, stats, telemetry, stopping
        )
    finally:
        handoff.flush()  # whatever ended the loop, no held shadow wake is lost


async def _serve_batches(
    connection: Connection,
    batch: _Batch,
    handoff: FireHandoff,
    counters: FrameCounters,
    stats: dict[str, int],
    telemetry: Telemetry,
    stopping: trio.Event,
) -> str:
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
        length = _declared_length(connection, counters)
        if length is None:
            return "oversized frame"
        if not await connection.receive_at_least(PREFIX_BYTES + length):
            return "eof mid-frame"
        oversized = False
        try:
            oversized = _take_buffered_frames(connection, length, batch, counters, stats)
            if batch.short_ack:
                await _send_short_ack_rest(connection, batch)
        finally:
            _finish_batch(batch, counters, telemetry, handoff)
        if oversized:
            _declared_length(connection, counters)  # counts it and logs it, after the span
            return "oversized frame"
        handoff.start_shadows(more_frames_waiting=lambda: frame_waiting(connection))
        await _checkpoint_unless_waited(connection)


class _Batch:
    """The frames of one batch between their decode and their fire; reused, never reallocated."""

    __slots__ = ("acked", "rejected", "short_ack", "short_frame", "short_sent")

    def __init__(self) -> None:
        self.acked: list[tuple[DecodedWake, int, int, int]] = []
        """Per accepted frame whose ack is out: (decoded wake, stamp_ns, received_at_ms, done_ns),
        ``done_ns`` being ``perf_counter_ns()`` once its ack's last byte was handed over."""
        self.rejected: list[DecodeError] = []
        self.short_ack = b""
        """The ack the kernel did not take whole (empty when every ack went out)."""
        self.short_sent = 0
        """How much of ``short_ack`` the kernel took."""
        self.short_frame: tuple[DecodedWake, int, int] | None = None
        """The accepted frame ``short_ack`` belongs to (None for a rejected one):
        (message, stamp_ns, received_at_ms)."""


def _declared_length(connection: Connection, counters: FrameCounters) -> int | None:
    """The body length the buffered prefix declares; None (logged, counted) when oversized."""
    start = connection.start
    try:
        return parse_frame_length(connection.view[start : start + PREFIX_BYTES])
    except FrameTooLargeError as error:
        counters.oversized_frames += 1
        _oversized_frame_warnings.warning(declared=error.declared)
        return None


def _take_buffered_frames(
    connection: Connection,
    length: int,
    batch: _Batch,
    counters: FrameCounters,
    stats: dict[str, int],
) -> bool:
    """Stamp, decode, encode and send the ack of each complete buffered frame, up to the batch size.

    The first frame (body ``length`` bytes) is known to be complete. Each ack goes to the kernel in
    its own non-blocking ``send`` before the next frame is stamped; one the kernel does not take
    whole is left in ``batch.short_ack`` and ends the batch. Returns True when an oversized prefix
    ended the batch (the connection must close once the batch is acked).

    Raises:
        PeerGone: the peer vanished; the frame being acked is left in ``batch.short_frame``.
    """
    perf_ns = time.perf_counter_ns
    wall_ns = time.time_ns
    send = connection.sock.send
    view = connection.view
    acked = batch.acked
    for _ in range(MAX_BATCH_FRAMES):
        # ---- timed span opens: stamp (the body's bytes are in the buffer) ----
        stamp_ns = perf_ns()
        received_at_ms = wall_ns() // 1_000_000
        body_start = connection.start + PREFIX_BYTES
        connection.start = body_start + length
        counters.frames += 1
        stats["frames"] += 1
        message: DecodedWake | None
        try:
            message = decode_wake(view[body_start : connection.start])
        except DecodeError as error:
            message = None
            counters.rejected += 1
            stats["rejected"] += 1
            ack = encode_rejected_ack(str(error), received_at_ms)
            batch.rejected.append(error)
        else:
            counters.accepted += 1
            stats["accepted"] += 1
            ack = encode_accepted_ack(message.correlation_id, received_at_ms)
        try:
            sent = send(ack)
        except BlockingIOError:
            sent = 0
        except _PEER_GONE as error:
            _hold_short(batch, ack, 0, message, stamp_ns, received_at_ms)
            raise PeerGone(str(error)) from None
        if sent < len(ack):
            _hold_short(batch, ack, sent, message, stamp_ns, received_at_ms)
            return False
        if message is not None:
            # ---- timed span closes: this frame's ack is in the kernel ----
            acked.append((message, stamp_ns, received_at_ms, perf_ns()))
        # The next frame joins the batch only if all of it is already here.
        available = connection.end - connection.start
        if available < PREFIX_BYTES:
            return False
        start = connection.start
        try:
            next_length = parse_frame_length(view[start : start + PREFIX_BYTES])
        except FrameTooLargeError:
            # Counted and logged by the caller once the batch is acked: no log inside the span.
            return True
        if available < PREFIX_BYTES + next_length:
            return False
        length = next_length
    return False


def _hold_short(
    batch: _Batch,
    ack: bytes,
    sent: int,
    message: DecodedWake | None,
    stamp_ns: int,
    received_at_ms: int,
) -> None:
    """Keep the ack the kernel did not take whole, and its frame, for the rest of the send."""
    batch.short_ack = ack
    batch.short_sent = sent
    batch.short_frame = None if message is None else (message, stamp_ns, received_at_ms)


async def _send_short_ack_rest(connection: Connection, batch: _Batch) -> None:
    """Wait for writability and send the rest of the short ack; its frame's span closes after it.

    Raises:
        PeerGone: the peer vanished.
    """
    view = memoryview(batch.short_ack)
    connection.waited = True
    while batch.short_sent < len(view):
        await trio.lowlevel.wait_writable(connection.sock)
        batch.short_sent += connection.send_now(view[batch.short_sent :])
    # ---- timed span closes for the short frame ----
    done_ns = time.perf_counter_ns()
    if batch.short_frame is not None:
        message, stamp_ns, received_at_ms = batch.short_frame
        batch.acked.append((message, stamp_ns, received_at_ms, done_ns))
    batch.short_frame = None
    batch.short_ack = b""


def _finish_batch(
    batch: _Batch,
    counters: FrameCounters,
    telemetry: Telemetry,
    handoff: FireHandoff,
) -> None:
    """After the sends: a row and a fire per acked frame, ``unacked`` for the short one, warnings.

    After a failed send (peer gone, cancelled), the frames whose acks went out whole still get
    their row and fire; the accepted frame whose ack did not is counted ``unacked``.
    """
    if batch.short_frame is not None:
        counters.unacked += 1
    batch.short_frame = None
    batch.short_ack = b""
    handoff.start_real(batch.acked)
    ended_at_ms = time.time_ns() // 1_000_000
    record = telemetry.record
    for decoded, stamp_ns, received_at_ms, done_ns in batch.acked:
        record(
            wake_recv_row(
                decoded.correlation_id,
                received_at_ms,
                ended_at_ms,
                done_ns - stamp_ns,
                decoded.dry_run,
            )
        )
    handoff.hold_shadows(batch.acked)
    batch.acked.clear()
    for error in batch.rejected:
        _rejected_frame_warnings.warning(field=error.field, reason=str(error))
    batch.rejected.clear()


async def _checkpoint_unless_waited(connection: Connection) -> None:
    # Every batch passes through the scheduler once; a batch whose reads already waited did.
    if not connection.waited:
        await trio.lowlevel.checkpoint()
