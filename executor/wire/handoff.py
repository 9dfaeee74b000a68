"""The hand-off from a connection's frames to their fires: real wakes first, shadows when caught up.

After a batch's acks are out (``executor.wire.connection``), its accepted wakes go to the fire path
in this order:

1. **the real wakes**, in frame order: a real order is decided and written inside ``start_fire``
   (``FirePath.start``), before any row of the batch is recorded and before any shadow fire of
   this batch, or of an earlier one still waiting here, has started;
2. the connection loop records the batch's ``wake_recv`` rows;
3. **the shadow wakes**, in frame order, but only while the connection has caught up: while
   another whole frame is already waiting to be read (in the buffer, or in the kernel: one
   non-blocking ``recv``), the batch's shadow wakes wait here and the loop reads, acks and fires
   the real wakes of the next batch first. They are started **one at a time**, the check made
   again once ``SHADOW_CHECK_NS`` of starting has passed since the last one, so a frame that
   arrives while they start waits for about that long and one shadow fire, not for all of them (a
   held burst of 100 took ~6 ms to start: a real wake written meanwhile waited that long;
   docs/performance/notebook/ 2026-12-02). Past ``MAX_DEFERRED_SHADOWS`` held, the oldest are
   started without asking; when the connection's loop ends (whatever ended it), all of them. While
   **another connection** may have work (its task is ready to run, or its socket holds bytes:
   ``another_connection_waiting``), the same check, once ``SHADOW_CHECK_NS`` of starting has passed,
   also hands the loop over: the connection returns to the scheduler (one checkpoint) and then goes
   on starting, so a real wake that arrives on another connection waits for about one check interval
   and one shadow fire, not for every shadow this connection holds. The starts past the bound take
   no turns: at most a batch of them, like the batch itself.

So during a burst of shadow wakes the connection keeps pace with its peer at the price of a
decode and an ack per frame, and a real wake in the burst waits only for the frames ahead of it
to be acked, not for their shadow fires (which cost several times more: a build, a signature or a
skip, four stage rows). A shadow fire measures the path; starting it later costs a measurement's
latency, never an order's (DISPATCH.md §1).

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import collections
import socket
import time
from collections.abc import Callable, Iterable
from typing import Final, Protocol

from executor.wire.protocol import (
    PREFIX_BYTES,
    DecodedWake,
    FrameTooLargeError,
    WakeMessage,
    parse_frame_length,
    wake_message_of,
)

MAX_DEFERRED_SHADOWS: Final = 256
"""Most shadow wakes one connection holds back while frames keep arriving (wakes). A burst of 200
(the reference's, and the benchmark's) fits whole; past it, the oldest are started as new ones
come, so a flood's measurements are late by at most this many fires. A guess."""

SHADOW_CHECK_NS: Final = 50_000
"""How long held shadows are started before the connection looks for a waiting frame again, and
for another connection with work to hand the loop to (ns).
A look is a ``recv`` system call when nothing is buffered; a shadow fire with an exchange takes
about this long to start (one look each), one without an exchange (a no-network executor, the
saturation benchmark) a few microseconds (one look per several). A guess."""

StartFire = Callable[[WakeMessage, int, int], None]
"""Starts the fire of an acked wake, given when its bytes were read and when its ack was out
(``perf_counter_ns``); never blocks."""

Acked = tuple[DecodedWake, int, int, int]
"""(decoded wake, read stamp, ``received_at_ms``, ack-out stamp) of one acked frame."""


class FireHandoff:
    """One connection's hand-off of acked wakes to the fire path (the module docstring's order).

    Args:
        start_fire: the fire path's entry (``ExecutorServer._start_fire``).
    """

    __slots__ = ("_check_ns", "_deferred", "_start_fire")

    def __init__(self, start_fire: StartFire, *, check_ns: int = SHADOW_CHECK_NS) -> None:
        self._start_fire = start_fire
        self._check_ns = check_ns
        self._deferred: collections.deque[tuple[DecodedWake, int, int]] = collections.deque()

    @property
    def deferred(self) -> int:
        """Shadow wakes waiting for the connection to catch up."""
        return len(self._deferred)

    def start_real(self, acked: list[Acked]) -> None:
        """Fire the batch's real wakes, in frame order (step 1)."""
        start_fire = self._start_fire
        for decoded, stamp_ns, _, done_ns in acked:
            if not decoded.dry_run:
                start_fire(wake_message_of(decoded), stamp_ns, done_ns)

    def hold_shadows(self, acked: list[Acked]) -> None:
        """Keep the batch's shadow wakes, in frame order, behind any held before (step 3)."""
        deferred = self._deferred
        for decoded, stamp_ns, _, done_ns in acked:
            if decoded.dry_run:
                deferred.append((decoded, stamp_ns, done_ns))

    def start_shadows(
        self,
        *,
        more_frames_waiting: Callable[[], bool],
        others_waiting: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Start the held shadow wakes in frame order, one at a time, until a frame is waiting or
        it is the other connections' turn; True when it stopped for them.

        ``more_frames_waiting`` is asked before the first start and again before the first start
        that comes ``check_ns`` or more after the last asking (only while fewer than
        ``MAX_DEFERRED_SHADOWS`` are held): True leaves the rest held for after the next batch,
        and returns False. ``others_waiting`` is asked, under the same bound, before the first
        start that comes ``check_ns`` or more after the first start below it in this call, or
        after its last asking: True leaves the rest held and returns True, for the caller to pass
        through the scheduler and call again (each call starts one shadow at least, about
        ``check_ns`` worth). The starts that bring the held shadows back under the bound take no
        turns: there are at most a batch of them, the delay a batch already puts on the other
        connections, and an overloaded server would pay a scheduler pass for each turn. Returns
        False with none held when neither stopped it.
        """
        deferred = self._deferred
        start_fire = self._start_fire
        clock = time.perf_counter_ns
        check_ns = self._check_ns
        ask_at = 0
        share_at = 0  # set at the first start: each call starts one shadow at least
        while deferred:
            if len(deferred) < MAX_DEFERRED_SHADOWS:
                now = clock()
                if now >= ask_at:
                    if more_frames_waiting():
                        return False
                    ask_at = now + check_ns
                if not share_at:
                    share_at = now + check_ns
                elif now >= share_at:
                    if others_waiting():
                        return True
                    share_at = now + check_ns
            decoded, stamp_ns, done_ns = deferred.popleft()
            start_fire(wake_message_of(decoded), stamp_ns, done_ns)
        return False

    def flush(self) -> None:
        """Start every held shadow wake now, in frame order (the connection's loop is ending)."""
        deferred, self._deferred = self._deferred, collections.deque()
        start_fire = self._start_fire
        for decoded, stamp_ns, done_ns in deferred:
            start_fire(wake_message_of(decoded), stamp_ns, done_ns)


class ReadBuffer(Protocol):
    """What :func:`frame_waiting` reads of a connection (``executor.wire.connection.Connection``):
    its socket and its receive buffer, unconsumed bytes from ``start`` to ``end``."""

    sock: socket.socket
    view: memoryview
    start: int
    end: int


class Peer(Protocol):
    """What :func:`another_connection_waiting` reads of a connection
    (``executor.wire.connection.Connection``): its socket, and whether its task is waiting for
    the first bytes of a frame."""

    sock: socket.socket
    idle: bool


def another_connection_waiting(connections: Iterable[Peer], this: Peer) -> bool:
    """Whether a connection other than ``this`` may have work for the loop: one whose task is not
    waiting for a frame's first bytes (mid-frame, or ready to run), or one whose task is and whose
    socket holds bytes (or an end of stream) already: one ``recv`` with ``MSG_PEEK`` each, which
    reads nothing. Cheaper than the scheduler pass it saves when all the others are quiet."""
    for other in connections:
        if other is this:
            continue
        if not other.idle:
            return True
        try:
            other.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        except OSError:
            return True  # its own task reads the error
        return True
    return False


def frame_waiting(connection: ReadBuffer) -> bool:
    """Whether a whole frame can be handled now: buffered, or in the kernel (one non-blocking
    ``recv`` into the connection's buffer reads what it has). An end of stream or a reset is left
    for the connection's next read, which sees it again."""
    if _frame_buffered(connection):
        return True
    if connection.start == connection.end:
        connection.start = connection.end = 0
    try:
        received = connection.sock.recv_into(connection.view[connection.end :])
    except (BlockingIOError, BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
        return False
    connection.end += received
    return received > 0 and _frame_buffered(connection)


def _frame_buffered(connection: ReadBuffer) -> bool:
    start = connection.start
    available = connection.end - start
    if available < PREFIX_BYTES:
        return False
    try:
        length = parse_frame_length(connection.view[start : start + PREFIX_BYTES])
    except FrameTooLargeError:
        return False  # the loop's next read finds it and closes the connection
    return available >= PREFIX_BYTES + length


__all__ = [
    "MAX_DEFERRED_SHADOWS",
    "SHADOW_CHECK_NS",
    "Acked",
    "FireHandoff",
    "Peer",
    "ReadBuffer",
    "StartFire",
    "another_connection_waiting",
    "frame_waiting",
]
