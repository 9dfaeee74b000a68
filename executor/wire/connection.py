"""One connection's frames: read, stamp, decode, ack, record, fire (SERVICE.md, per frame).

Frames are handled in **batches**: after a read, every frame already complete in the receive
buffer (at most ``MAX_BATCH_FRAMES``) is stamped, decoded and its ack encoded, one frame after the
other, with no scheduler pass in between; then the batch's real wakes are fired (a real order is
decided and written right there), then each acked frame's ``wake_recv`` row is recorded, and the
shadow fires are started once no further whole frame is waiting (``executor.wire.handoff``: the
order, and why); then the loop takes one Trio checkpoint (cancellation, fairness), skipped when
the batch's reads already waited in the scheduler. A frame cut at the buffer's end ends the
batch: the acks before it are already out. So does a real wake, once its ack is out: its fire
starts before the frames behind it are decoded. A pipelining connection yields once per batch, and
while another connection has work it also yields between held shadow fires, once per
``SHADOW_CHECK_NS`` of starting them: it delays the others by at most one batch's work, or about
one check interval of shadow starts.

**When an ack is sent** depends on what the peer does (issue 24). A frame with nothing complete
behind it in the buffer (a paced peer, waiting on each ack; the last frame of a burst's read) has
its ack handed to the kernel in its own non-blocking ``send`` at once. A frame with the next frame
already complete behind it was written by a peer that did not wait for its ack (it pipelines):
its ack is held and joined with the acks of the frames that follow, up to ``ACK_JOIN_FRAMES``, and
the joined acks go out in one ``send`` after the last of them is encoded. One system call (and
one wake-up of the peer's reader, and one chance for another thread to take the GIL) per joined
run instead of per frame is what a pipelining peer's throughput needs; a peer that waits on each
ack never has its ack held. Acks always leave in frame order. An ack the kernel does not take
whole ends the batch: the task waits for writability to send the rest, and the frames behind it
stay buffered for the next batch.

**Reading between batches** (issue 34). One read takes whatever the kernel holds, up to the
buffer (~300 small frames after a stall); working through them takes several batches. Before each
batch after the first, while unconsumed bytes remain, the loop takes what the kernel holds into
the buffer's free room (``Connection.top_up``: one non-blocking ``recv``), so the peer's socket
empties at the pace the frames arrive, not once per buffer: a poller that waits for its writes to
drain never sees a full socket while the executor works through what it already read (a full
buffer's worth kept it from reading for 1-8 ms: docs/performance/notebook/ 2026-12-06). It does
so while the telemetry writer keeps up (``Telemetry.writer_keeping_up``: a burst), and before
every batch with ``Connection.reads_between_batches`` (``executor serve
--read-between-batches``). Flat out, where the writer falls behind, reading more often cost one
connection 17-20% of its rows/s (the same notebook): the rows are the writer's share of the CPUs.
Frames are still handled in order; only where the bytes wait changes.

The timed span (``wake_recv``) of a frame starts when its handling starts (its bytes are in the
buffer: after the body read) and ends when the last byte of **its own** ack was handed to the
kernel (SERVICE.md step 5). Sent alone, it contains the frame's strict decode (``decode_wake``:
every check of the protocol), its ack encoding and its ``send``. Joined, it also contains the
decode and ack encoding of the later frames of its run (at most ``ACK_JOIN_FRAMES - 1``) and the
joined ``send``: its ack was in the kernel only then. The frozen ``WakeMessage`` the fire takes is
built from the decoded wake after the batch's acks are out (``wake_message_of``, ~1 µs). No fire
work of any frame of the batch has started before the batch's last ack is out. With
``executor serve --frame-spans`` each acked frame also gets its **own** span, a ``wake_frame`` row:
from the same stamp to its own ack encoded, so the frame's decode and ack encoding alone, joined or
not, without any ``send`` (a second row per frame: for measuring, off by default).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from typing import Final

import trio

from executor.logs import RateLimitedWarning
from executor.telemetry import LatencyRow, Stage, Telemetry, wake_recv_row
from executor.wire.batch import (
    ACK_JOIN_FRAMES,
    MAX_BATCH_FRAMES,
    PEER_GONE_ERRORS,
    Batch,
    FrameCounters,
    PeerGone,
    send_short_ack_rest,
    take_buffered_frames,
)
from executor.wire.handoff import Acked, FireHandoff, StartFire, frame_waiting
from executor.wire.protocol import (
    MAX_FRAME_BYTES,
    PREFIX_BYTES,
    FrameTooLargeError,
    parse_frame_length,
)

RECEIVE_BUFFER_BYTES: Final = 2 * (PREFIX_BYTES + MAX_FRAME_BYTES)
"""One connection's read buffer: room for a whole maximal frame wherever the last one ended."""

TOP_UP_ROOM: Final = 16 * 1024
"""Free bytes behind the unconsumed ones below which ``Connection.top_up`` first moves them to
the buffer's front (bytes): about 40 small frames' room, so a top-up is worth its system call,
and a move (a ``memmove`` of at most the buffer) is rare."""

FRAME_READ_TIMEOUT_S: Final = 5.0
"""Longest a frame may take from its first byte to its last (seconds): a poller writes a wake in
one send, so a frame incomplete for seconds is a stuck peer holding a connection task. Far beyond
any stall of a loaded machine; a guess. A peer quiet *between* frames is never timed out."""

_oversized_frame_warnings: Final = RateLimitedWarning("oversized frame: closing connection")
_rejected_frame_warnings: Final = RateLimitedWarning("rejected frame")


class FrameReadTimeout(Exception):
    """A frame's bytes stopped arriving: ``FRAME_READ_TIMEOUT_S`` passed since the first wait."""


class Connection:
    """One peer: a non-blocking socket and a fixed receive buffer with exact-length reads."""

    def __init__(self, sock: socket.socket, *, reads_between_batches: bool = False) -> None:
        self.sock = sock
        self.reads_between_batches = reads_between_batches  # top_up before each batch
        self.buffer = bytearray(RECEIVE_BUFFER_BYTES)
        self.view = memoryview(self.buffer)
        self.start = 0  # first unconsumed byte
        self.end = 0  # one past the last received byte
        self.waited = False  # whether this frame's reads went through the scheduler
        self.idle = False  # waiting for the first bytes of a frame
        self.frame_deadline: float | None = None  # Trio time by which this frame must be whole

    async def receive_at_least(self, size: int) -> bool:
        """Make ``size`` unconsumed bytes available; False on EOF (clean or mid-frame).

        Raises:
            FrameReadTimeout: some of the frame is here and the rest did not come within
                ``FRAME_READ_TIMEOUT_S`` of the first wait for it (a cancel scope on that slow
                path only); with none of it here the wait is unbounded (a quiet peer).
        """
        self.make_room(size)
        while self.end - self.start < size:
            try:
                received = self.sock.recv_into(self.view[self.end :])
            except BlockingIOError:
                self.waited = True
                if self.end == self.start:
                    await trio.lowlevel.wait_readable(self.sock)
                    continue
                if self.frame_deadline is None:
                    self.frame_deadline = trio.current_time() + FRAME_READ_TIMEOUT_S
                with trio.move_on_at(self.frame_deadline):
                    await trio.lowlevel.wait_readable(self.sock)
                    continue
                raise FrameReadTimeout(f"incomplete after {FRAME_READ_TIMEOUT_S} s") from None
            except PEER_GONE_ERRORS:
                return False
            if received == 0:
                return False
            self.end += received
        return True

    def top_up(self) -> None:
        """Take what the kernel holds into the buffer's free room: one non-blocking ``recv``.

        Only while unconsumed bytes remain: an empty buffer is the next read's, which waits if it
        must. The unconsumed bytes move to the front first when less than ``TOP_UP_ROOM`` is free
        behind them. Nothing to read, an end of stream or a reset is left for the next read,
        which sees it again.
        """
        pending = self.end - self.start
        if not pending:
            return
        self.make_room(pending + TOP_UP_ROOM)  # to the front when less is free behind them
        if self.end == len(self.buffer):
            return
        try:
            self.end += self.sock.recv_into(self.view[self.end :])
        except (BlockingIOError, *PEER_GONE_ERRORS):
            return

    def make_room(self, size: int) -> None:
        """Let the buffer take ``size`` unconsumed bytes from ``start``: back to the front when
        nothing is unconsumed, the unconsumed bytes moved there when ``size`` would not fit."""
        if self.start == self.end:
            self.start = self.end = 0
        elif len(self.buffer) - self.start < size:
            pending = self.end - self.start
            self.buffer[:pending] = self.buffer[self.start : self.end]
            self.start, self.end = 0, pending

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
        except PEER_GONE_ERRORS as error:
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
    others_waiting: Callable[[], bool] = lambda: False,
    frame_spans: bool = False,
) -> str:
    """Handle frames until EOF or shutdown; return why the loop ended.

    Frames already complete in the receive buffer are handled as one batch of at most
    ``MAX_BATCH_FRAMES``: each is stamped, decoded and its ack encoded in turn, its ack sent at
    once or, when the next frame is already complete behind it, joined with the next ones (at
    most ``ACK_JOIN_FRAMES``); then the rows are recorded and the fires started, then the loop
    takes its one checkpoint. A frame cut at the buffer's end, or acks the kernel did not take
    whole, close the batch.

    Args:
        connection: the peer.
        counters: the server-wide frame counters.
        stats: this connection's ``frames``/``accepted``/``rejected`` counts, for its close line.
        telemetry: where ``wake_recv`` rows go (without waiting).
        start_fire: starts the fire of an acked wake as its own task; never blocks.
        stopping: set once shutdown has begun.
        others_waiting: whether another connection may have work for the loop: held shadow
            wakes are then started in turns with it (``executor.wire.handoff``).
        frame_spans: also record each acked frame's own span (``wake_frame`` rows: its stamp to
            its own ack encoded), beside ``wake_recv``.

    Raises:
        PeerGone: the peer vanished while an ack was being written.

    Cancellation: between frames the wait for the next frame is ended at shutdown by
    ``Connection.stop_reading`` rather than by cancellation (a per-frame CancelScope cost ~7 us
    on the wake-up path). The only wait inside a batch is for writability, for the acks the
    kernel did not take whole: cancelled there, each accepted frame whose ack was not all handed
    over is counted ``unacked``; the frames whose acks were get their row and fire; the frames
    after them were never decoded and are dropped with the connection, uncounted like any
    half-read frame.
    """
    batch = Batch(frame_spans=frame_spans)
    handoff = FireHandoff(start_fire)
    try:
        return await _serve_batches(
            connection, batch, handoff, counters, stats, telemetry, stopping, others_waiting
        )
    finally:
        handoff.flush()  # whatever ended the loop, no held shadow wake is lost


async def _serve_batches(
    connection: Connection,
    batch: Batch,
    handoff: FireHandoff,
    counters: FrameCounters,
    stats: dict[str, int],
    telemetry: Telemetry,
    stopping: trio.Event,
    others_waiting: Callable[[], bool],
) -> str:
    def more_frames_waiting() -> bool:
        return frame_waiting(connection)

    while True:
        connection.waited = False
        connection.frame_deadline = None
        if stopping.is_set():
            return "shutdown"
        if connection.end != connection.start and (
            connection.reads_between_batches or telemetry.writer_keeping_up()
        ):
            connection.top_up()  # frames left from the last read: the kernel's bytes join them
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
            oversized = take_buffered_frames(connection, length, batch, counters, stats)
            if batch.held:
                await send_short_ack_rest(connection, batch)
        finally:
            _finish_batch(batch, counters, telemetry, handoff)
        if oversized:
            _declared_length(connection, counters)  # counts it and logs it, after the span
            return "oversized frame"
        if handoff.start_shadows(
            more_frames_waiting=more_frames_waiting, others_waiting=others_waiting
        ):
            # The other connections' turn (a real wake may be waiting there), then the rest.
            while True:
                await trio.lowlevel.checkpoint()
                if not handoff.start_shadows(
                    more_frames_waiting=more_frames_waiting, others_waiting=others_waiting
                ):
                    break
        else:
            await _checkpoint_unless_waited(connection)


def _declared_length(connection: Connection, counters: FrameCounters) -> int | None:
    """The body length the buffered prefix declares; None (logged, counted) when oversized."""
    start = connection.start
    try:
        return parse_frame_length(connection.view[start : start + PREFIX_BYTES])
    except FrameTooLargeError as error:
        counters.oversized_frames += 1
        _oversized_frame_warnings.warning(declared=error.declared)
        return None


def _finish_batch(
    batch: Batch,
    counters: FrameCounters,
    telemetry: Telemetry,
    handoff: FireHandoff,
) -> None:
    """After the sends: the real wakes fired, a row per acked frame, the shadow wakes handed over
    (``executor.wire.handoff``), ``unacked`` for the rest, warnings.

    After a failed send (peer gone, cancelled), the frames whose acks went out whole still get
    their row and fire; each accepted frame whose ack did not is counted ``unacked``.
    """
    counters.unacked += sum(1 for message, *_ in batch.held if message is not None)
    batch.held.clear()
    batch.held_acks.clear()
    batch.short_ack = b""
    batch.short_sent = 0
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
    if batch.encoded is not None:
        _record_frame_spans(batch.acked, batch.encoded, ended_at_ms, record)
    handoff.hold_shadows(batch.acked)
    batch.acked.clear()
    for error in batch.rejected:
        _rejected_frame_warnings.warning(field=error.field, reason=str(error))
    batch.rejected.clear()


def _record_frame_spans(
    acked: list[Acked], encoded: list[int], ended_at_ms: int, record: Callable[[LatencyRow], None]
) -> None:
    """A ``wake_frame`` row per acked frame (``--frame-spans``): its stamp to its own ack encoded.

    ``encoded`` holds every accepted frame of the batch in frame order and the acked ones are its
    first (acks leave in order); the rest (a peer gone mid-send) get no row, like ``wake_recv``.
    """
    for (decoded, stamp_ns, received_at_ms, _), encoded_ns in zip(acked, encoded, strict=False):
        record(
            wake_recv_row(
                decoded.correlation_id,
                received_at_ms,
                ended_at_ms,
                encoded_ns - stamp_ns,
                decoded.dry_run,
                Stage.WAKE_FRAME,
            )
        )
    encoded.clear()


async def _checkpoint_unless_waited(connection: Connection) -> None:
    # Every batch passes through the scheduler once; a batch whose reads already waited did.
    if not connection.waited:
        await trio.lowlevel.checkpoint()


__all__ = [
    "ACK_JOIN_FRAMES",
    "MAX_BATCH_FRAMES",
    "RECEIVE_BUFFER_BYTES",
    "TOP_UP_ROOM",
    "Connection",
    "FrameCounters",
    "PeerGone",
    "serve_frames",
]
