"""The acks of one batch: buffered frames stamped, decoded and acked, each ack sent alone or joined.

``executor.wire.connection`` reads and hands each batch here. A frame with nothing complete behind
it in the buffer has its ack sent at once, in its own non-blocking ``send``; one with the next
frame already complete behind it (a pipelining peer, which did not wait for this ack) holds its ack
to join the next ones, at most ``ACK_JOIN_FRAMES``, sent together once the last of them is encoded.
A real (non-dry-run) wake's ack is never held: it goes out with the acks joined before it, and it
ends its batch, so its fire starts as early as a frame sent alone: the frames buffered behind it
wait for the next batch (before, up to 31 of them were decoded and acked first:
docs/performance/notebook/, 2026-12-04). What each frame's ``wake_recv`` span holds in either case
is in ``executor.wire.connection``'s docstring.

Everything here is synchronous but ``send_short_ack_rest``, the one wait inside a batch.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Final, Protocol

import trio

from executor.wire.protocol import (
    PREFIX_BYTES,
    DecodedWake,
    DecodeError,
    FrameTooLargeError,
    decode_wake,
    encode_accepted_ack,
    encode_rejected_ack,
    parse_frame_length,
)

MAX_BATCH_FRAMES: Final = 32
"""Most buffered frames handled between two checkpoints (frames). One scheduler pass and one batch
of rows and fires per this many pipelined frames instead of per frame; at ~10 µs of work a frame,
another connection waits at most a few hundred µs for its turn. A guess, measured in
docs/performance/notebook/ (2026-11-30)."""

ACK_JOIN_FRAMES: Final = 8
"""Most acks of pipelined frames joined into one ``send`` (frames). Eight cuts the system calls of
a full batch from 32 to 4, most of what joining the whole batch saves, while a joined frame's span
holds at most seven later frames' decode and ack encoding (~3 µs each) rather than 31. Measured
against joining whole batches in docs/performance/notebook/ (2026-12-01)."""

_INCOMPLETE: Final = -1
"""``next_complete_frame``: the next frame is not all in the buffer yet."""
_OVERSIZED: Final = -2
"""``next_complete_frame``: the next prefix declares more than ``MAX_FRAME_BYTES``."""

PEER_GONE_ERRORS: Final = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
"""What a socket call raises when the peer closed or reset the connection."""


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


class BufferedPeer(Protocol):
    """What a batch touches of a connection (``executor.wire.connection.Connection``)."""

    sock: socket.socket
    view: memoryview
    start: int
    end: int
    waited: bool

    def send_now(self, data: bytes | memoryview) -> int: ...


class Batch:
    """The frames of one batch between their decode and their fire; reused, never reallocated."""

    __slots__ = ("acked", "encoded", "held", "held_acks", "rejected", "short_ack", "short_sent")

    def __init__(self, *, frame_spans: bool = False) -> None:
        self.acked: list[tuple[DecodedWake, int, int, int]] = []
        """Per accepted frame whose ack is out: (decoded wake, stamp_ns, received_at_ms, done_ns),
        ``done_ns`` being ``perf_counter_ns()`` once its ack's last byte was handed over."""
        self.rejected: list[DecodeError] = []
        self.held_acks: list[bytes] = []
        """Encoded acks not handed to the kernel yet (a pipelined run being joined), in order."""
        self.held: list[tuple[DecodedWake | None, int, int, int]] = []
        """The frames of ``held_acks`` (or of ``short_ack``): (decoded wake or None for a rejected
        frame, stamp_ns, received_at_ms, where its ack ends in the joined bytes)."""
        self.short_ack = b""
        """The joined acks the kernel did not take whole (empty when every ack went out)."""
        self.short_sent = 0
        """How much of ``short_ack`` the kernel took."""
        self.encoded: list[int] | None = [] if frame_spans else None
        """With frame spans (``executor serve --frame-spans``): per accepted frame of the batch,
        in frame order, ``perf_counter_ns()`` once its own ack was encoded. Acks leave in frame
        order, so the frames of ``acked`` are its first ones. None without frame spans."""


def next_complete_frame(connection: BufferedPeer) -> int:
    """The body length of the next frame when all of it is buffered, else ``_INCOMPLETE`` (or
    ``_OVERSIZED`` for a prefix over the limit, which the caller counts after the span)."""
    available = connection.end - connection.start
    if available < PREFIX_BYTES:
        return _INCOMPLETE
    start = connection.start
    try:
        length = parse_frame_length(connection.view[start : start + PREFIX_BYTES])
    except FrameTooLargeError:
        return _OVERSIZED
    return length if available >= PREFIX_BYTES + length else _INCOMPLETE


def take_buffered_frames(
    connection: BufferedPeer,
    length: int,
    batch: Batch,
    counters: FrameCounters,
    stats: dict[str, int],
) -> bool:
    """Stamp, decode and ack each complete buffered frame, up to the batch size or a real wake.

    The first frame (body ``length`` bytes) is known to be complete. A frame with nothing complete
    behind it, and a real wake, has its ack sent at once (with the acks held before it), and a
    real wake's ack ends the batch (its fire is next: ``executor.wire.handoff``); a shadow
    or rejected frame with the next frame complete behind it holds its ack to join the next ones
    (up to ``ACK_JOIN_FRAMES``, never past the batch). Joined acks the kernel does not take whole
    are left in ``batch.short_ack`` and end the batch. Returns True when an oversized prefix ended
    the batch (the connection must close once the batch is acked).

    Raises:
        PeerGone: the peer vanished; the frames being acked are left in ``batch.held``.
    """
    perf_ns = time.perf_counter_ns
    wall_ns = time.time_ns
    view = connection.view
    held_acks = batch.held_acks
    held = batch.held
    encoded = batch.encoded
    for count in range(1, MAX_BATCH_FRAMES + 1):
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
            if encoded is not None:
                encoded.append(perf_ns())  # ---- the frame's own span closes (wake_frame) ----
        held_acks.append(ack)
        held.append((message, stamp_ns, received_at_ms, len(ack)))
        # The next frame joins the batch only if all of it is already here.
        next_length = next_complete_frame(connection)
        if (
            next_length >= 0
            and len(held_acks) < ACK_JOIN_FRAMES
            and count < MAX_BATCH_FRAMES
            and (message is None or message.dry_run)
        ):
            length = next_length
            continue  # the peer pipelines: this shadow's ack waits to join the next ones
        if not send_held_acks(connection, batch):
            return False
        if message is not None and not message.dry_run:
            # A real wake ends its batch: its fire starts now, not after the frames behind it.
            return False
        if next_length < 0:
            # Oversized: counted and logged by the caller once the batch is acked, not in a span.
            return next_length == _OVERSIZED
        length = next_length
    return False


def send_held_acks(connection: BufferedPeer, batch: Batch) -> bool:
    """Hand the held acks to the kernel in one non-blocking ``send``; False when it took less.

    Each frame's span closes when the ``send`` that took the last byte of its ack returned.

    Raises:
        PeerGone: the peer vanished; the frames stay in ``batch.held`` (counted unacked).
    """
    held_acks = batch.held_acks
    data = held_acks[0] if len(held_acks) == 1 else b"".join(held_acks)
    try:
        sent = connection.sock.send(data)
    except BlockingIOError:
        sent = 0
    except PEER_GONE_ERRORS as error:
        held_acks.clear()
        raise PeerGone(str(error)) from None
    # ---- timed span closes for every frame whose ack is now in the kernel ----
    done_ns = time.perf_counter_ns()
    held_acks.clear()
    if sent == len(data):
        acked = batch.acked
        for message, stamp_ns, received_at_ms, _ in batch.held:
            if message is not None:
                acked.append((message, stamp_ns, received_at_ms, done_ns))
        batch.held.clear()
        return True
    batch.short_ack = data
    batch.short_sent = sent
    close_spans_sent(batch, done_ns)
    return False


def close_spans_sent(batch: Batch, done_ns: int) -> None:
    """Move the held frames whose whole ack lies in the first ``short_sent`` bytes to ``acked``."""
    held = batch.held
    ack_end = 0
    taken = 0
    for message, stamp_ns, received_at_ms, ack_bytes in held:
        if ack_end + ack_bytes > batch.short_sent:
            break
        ack_end += ack_bytes
        taken += 1
        if message is not None:
            batch.acked.append((message, stamp_ns, received_at_ms, done_ns))
    del held[:taken]
    batch.short_ack = batch.short_ack[ack_end:]
    batch.short_sent -= ack_end


async def send_short_ack_rest(connection: BufferedPeer, batch: Batch) -> None:
    """Wait for writability and send the rest of the short acks; each span closes after its ack.

    Raises:
        PeerGone: the peer vanished.
    """
    connection.waited = True
    while batch.held:
        await trio.lowlevel.wait_writable(connection.sock)
        batch.short_sent += connection.send_now(memoryview(batch.short_ack)[batch.short_sent :])
        # ---- timed span closes for the frames whose acks are now whole in the kernel ----
        close_spans_sent(batch, time.perf_counter_ns())
    batch.short_ack = b""
    batch.short_sent = 0
