"""Each real frame gets its own ack ``send``, in frame order, and its fire before the next frame.

``serve_frames`` is driven here over a scripted socket: its ``recv_into`` hands over bytes the test
chose (so what one batch holds is decided by the test, not by timing), its ``send`` records every
call and takes what the script says, and its ``fileno`` is a real socket's whose send buffer the
test fills, so a wait for writability blocks until the test cancels it.
"""

from __future__ import annotations

import socket
from typing import cast

import pytest
import trio

from executor.recording.rows import LatencyRow
from executor.telemetry import Telemetry
from executor.wire.connection import Connection, FrameCounters, PeerGone, serve_frames
from executor.wire.protocol import (
    WakeMessage,
    decode_wake_ack,
    encode_accepted_ack,
    encode_frame,
)
from tests.support.inprocess import make_wake

Events = list[tuple[str, str]]


class ScriptedSocket:
    """What ``serve_frames`` touches of a socket, scripted.

    ``takes`` says, call by call, what ``send`` does: an int is how many bytes it takes (``-1``:
    all), an exception is raised; past the script it takes everything.
    """

    def __init__(
        self, incoming: bytes, events: Events, takes: list[int | Exception], stuck: socket.socket
    ) -> None:
        self._incoming = incoming
        self._events = events
        self._takes = takes
        self._stuck = stuck
        self.sent: list[bytes] = []

    def recv_into(self, view: memoryview) -> int:
        """Everything scripted at once, then end-of-file."""
        size = min(len(view), len(self._incoming))
        view[:size] = self._incoming[:size]
        self._incoming = self._incoming[size:]
        return size

    def send(self, data: bytes | memoryview) -> int:
        take = self._takes.pop(0) if self._takes else -1
        if isinstance(take, Exception):
            raise take
        taken = bytes(data) if take < 0 else bytes(data[:take])
        self._events.append(("send", _label(taken) if take < 0 else "partial"))
        self.sent.append(taken)
        return len(taken)

    def fileno(self) -> int:
        return self._stuck.fileno()


def _label(data: bytes) -> str:
    """The correlation id of a whole ack, or "rest" for the tail of one."""
    try:
        return decode_wake_ack(data[4:]).correlation_id
    except ValueError:
        return "rest"


def ack_ids(stream: bytes) -> list[str]:
    """The correlation ids of the acks a byte stream holds, in order."""
    ids = []
    while stream:
        end = 4 + int.from_bytes(stream[:4], "big")
        ids.append(decode_wake_ack(stream[4:end]).correlation_id)
        stream = stream[end:]
    return ids


class RecordingTelemetry:
    """Stands in for :class:`Telemetry`: keeps every row handed to ``record``; says the writer
    keeps up only when told to (the loop then reads between batches)."""

    def __init__(self, *, keeping_up: bool = False) -> None:
        self.rows: list[LatencyRow] = []
        self.keeping_up = keeping_up

    def writer_keeping_up(self) -> bool:
        return self.keeping_up

    def record(self, row: LatencyRow) -> None:
        self.rows.append(row)


def full_socketpair() -> tuple[socket.socket, socket.socket]:
    """A connected pair whose first end's send buffer is full (a wait for writability blocks)."""
    stuck, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.setblocking(False)
    try:
        while True:
            stuck.send(b"x" * 65536)
    except BlockingIOError:
        pass
    return stuck, peer


class Scripted:
    """One ``serve_frames`` run over a scripted socket, with what it counted and recorded."""

    def __init__(
        self,
        wakes: list[WakeMessage] | bytes,
        takes: list[int | Exception],
        *,
        writable: bool = False,
    ) -> None:
        """``wakes``: the frames the peer sent, or their bytes as sent."""
        self.events: Events = []
        self._stuck, self._peer = full_socketpair()
        incoming = wakes if isinstance(wakes, bytes) else b"".join(map(encode_frame, wakes))
        # Waits for writability go to the full end (they block) or to its idle peer (they don't).
        polled = self._peer if writable else self._stuck
        self.sock = ScriptedSocket(incoming, self.events, takes, polled)
        self.counters = FrameCounters()
        self.telemetry = RecordingTelemetry()
        self.fired: list[str] = []

    async def serve(self, *, fires_in_events: bool = False, frame_spans: bool = False) -> str:
        """Run ``serve_frames`` until it returns (EOF once the script's bytes are consumed); with
        ``fires_in_events`` each fire is also an ``("fire", id)`` event."""

        def start_fire(message: WakeMessage, *_: int) -> None:
            self.fired.append(message.correlation_id)
            if fires_in_events:
                self.events.append(("fire", message.correlation_id))

        try:
            return await serve_frames(
                Connection(cast(socket.socket, self.sock)),
                counters=self.counters,
                stats={"frames": 0, "accepted": 0, "rejected": 0},
                telemetry=cast(Telemetry, self.telemetry),
                start_fire=start_fire,
                stopping=trio.Event(),
                frame_spans=frame_spans,
            )
        finally:
            self.close()

    def close(self) -> None:
        """Close the socket pair whose ends the waits for writability poll."""
        self._stuck.close()
        self._peer.close()

    def recorded(self) -> list[str]:
        return [row.correlation_id for row in self.telemetry.rows]


async def ticker(events: Events, task_status: trio.TaskStatus[None]) -> None:
    """Note every pass this task gets through the scheduler."""
    task_status.started()
    while True:
        events.append(("tick", ""))
        await trio.lowlevel.checkpoint()


async def test_each_real_frame_is_acked_alone_and_fired_before_the_next_is_read() -> None:
    """Five buffered real frames make five sends of exactly their own acks, in order, each
    followed by its own fire before the next frame's send (a real wake ends its batch)."""
    run = Scripted([make_wake(f"order{i}") for i in range(5)], [])
    assert await run.serve(fires_in_events=True) == "eof"
    acks = [decode_wake_ack(sent[4:]) for sent in run.sock.sent]
    assert [ack.correlation_id for ack in acks] == [f"order{i}" for i in range(5)]
    assert run.sock.sent == [
        encode_accepted_ack(ack.correlation_id, ack.received_at_ms) for ack in acks
    ]
    assert run.events == [
        event for i in range(5) for event in (("send", f"order{i}"), ("fire", f"order{i}"))
    ]
    assert run.recorded() == run.fired == [f"order{i}" for i in range(5)]
    assert (run.counters.frames, run.counters.accepted, run.counters.unacked) == (5, 5, 0)


async def test_cancelled_short_ack_counts_only_its_frame_unacked() -> None:
    """Cut while the third ack waits for room: frames 1-2 are recorded and fired, 3 is unacked."""
    run = Scripted([make_wake(f"cut{i}") for i in range(6)], [-1, -1, 7])
    with trio.move_on_after(0.5) as scope:  # the short ack's rest can never be written
        await run.serve()
    assert scope.cancelled_caught
    assert run.events == [("send", "cut0"), ("send", "cut1"), ("send", "partial")]
    assert run.recorded() == run.fired == ["cut0", "cut1"]
    # Frames 4-6 were never decoded: they are dropped with the connection, like half-read ones.
    assert (run.counters.frames, run.counters.accepted, run.counters.unacked) == (3, 3, 1)


async def test_peer_gone_mid_batch_records_the_frames_before_it() -> None:
    """A send that finds the peer gone: earlier frames keep their row and fire, that one unacked."""
    run = Scripted([make_wake(f"gone{i}") for i in range(4)], [-1, BrokenPipeError("gone")])
    with pytest.raises(PeerGone):
        await run.serve()
    assert run.recorded() == run.fired == ["gone0"]
    assert (run.counters.frames, run.counters.accepted, run.counters.unacked) == (2, 2, 1)


async def test_short_ack_rest_closes_its_span_then_the_next_batch_goes_on() -> None:
    """An ack the kernel takes in two parts ends the batch; the rest of the frames follow."""
    run = Scripted([make_wake(f"rest{i}") for i in range(3)], [5], writable=True)
    assert await run.serve() == "eof"
    assert [label for _, label in run.events] == ["partial", "rest", "rest1", "rest2"]
    assert ack_ids(b"".join(run.sock.sent)) == ["rest0", "rest1", "rest2"]
    assert run.recorded() == run.fired == ["rest0", "rest1", "rest2"]
    assert (run.counters.frames, run.counters.unacked) == (3, 0)
