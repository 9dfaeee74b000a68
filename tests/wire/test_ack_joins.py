"""Acks of pipelined shadow frames are joined into one ``send`` (at most ``ACK_JOIN_FRAMES``);
a frame alone in the buffer, and a real wake, get theirs at once.

Driven over the scripted socket of ``test_batch_acks``: what one read hands over is decided by
the test (all at once: the peer pipelined; one frame per read: the peer waited on each ack).
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Iterator

import pytest
import trio

from executor.wire.connection import ACK_JOIN_FRAMES, MAX_BATCH_FRAMES, PeerGone
from executor.wire.protocol import WakeMessage, encode_accepted_ack, encode_frame
from tests.support.inprocess import make_wake
from tests.wire.test_batch_acks import Events, Scripted, ScriptedSocket, ack_ids

TICK_NS = 1_000
"""What the fake clock advances per ``perf_counter_ns`` call (ns)."""


class OneFramePerRead(ScriptedSocket):
    """Hands over one group of whole frames per ``recv_into`` call, and the next group only once
    every frame handed over so far is acked (a peer that waits on each ack): before that, there
    is nothing to read."""

    def __init__(
        self,
        groups: list[list[bytes]],
        events: Events,
        takes: list[int | Exception],
        stuck: socket.socket,
    ) -> None:
        super().__init__(b"", events, takes, stuck)
        self._groups = groups
        self._handed = 0

    def recv_into(self, view: memoryview) -> int:
        if not self._groups:
            return 0
        if len(ack_ids(b"".join(self.sent))) < self._handed:
            raise BlockingIOError  # the peer has not written the next frame yet
        group = self._groups.pop(0)
        data = b"".join(group)
        view[: len(data)] = data
        self._handed += len(group)
        return len(data)


def shadows(prefix: str, count: int) -> list[WakeMessage]:
    return [make_wake(f"{prefix}{i}", dry_run=True) for i in range(count)]


def one_frame_per_read(run: Scripted, groups: list[list[WakeMessage]]) -> None:
    """Make ``run``'s socket hand over each group of wakes in one read."""
    frames = [[encode_frame(wake) for wake in group] for group in groups]
    run.sock = OneFramePerRead(frames, run.events, run.sock._takes, run.sock._stuck)


def ack_length(correlation_id: str) -> int:
    """The length of that id's accepted ack (a 13-digit millisecond stamp, as now)."""
    return len(encode_accepted_ack(correlation_id, 1_787_289_600_123))


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``perf_counter_ns`` advances ``TICK_NS`` per call, so spans count the calls between."""
    ticks = itertools.count(0, TICK_NS)
    monkeypatch.setattr(time, "perf_counter_ns", lambda: next(ticks))
    yield


async def test_acks_of_pipelined_shadow_frames_go_out_in_one_send_in_order() -> None:
    """Five shadow frames buffered together: one send holding their five acks, in frame order."""
    run = Scripted(shadows("s", 5), [])
    assert await run.serve() == "eof"
    assert [ack_ids(sent) for sent in run.sock.sent] == [[f"s{i}" for i in range(5)]]
    assert run.recorded() == run.fired == [f"s{i}" for i in range(5)]
    assert (run.counters.frames, run.counters.accepted, run.counters.unacked) == (5, 5, 0)


async def test_at_most_ack_join_frames_acks_share_a_send() -> None:
    """Twenty buffered shadow frames go out as sends of 8, 8 and 4 acks."""
    assert ACK_JOIN_FRAMES == 8 and MAX_BATCH_FRAMES >= 20
    run = Scripted(shadows("j", 20), [])
    assert await run.serve() == "eof"
    assert [len(ack_ids(sent)) for sent in run.sock.sent] == [8, 8, 4]
    assert ack_ids(b"".join(run.sock.sent)) == [f"j{i}" for i in range(20)]


async def test_a_frame_alone_in_the_buffer_gets_its_own_send() -> None:
    """A peer that waits on each ack (one frame per read): every ack is its own send."""
    run = Scripted([], [])
    one_frame_per_read(run, [[wake] for wake in shadows("p", 3)])
    assert await run.serve() == "eof"
    assert [ack_ids(sent) for sent in run.sock.sent] == [["p0"], ["p1"], ["p2"]]
    assert run.recorded() == ["p0", "p1", "p2"]


async def test_a_real_wake_ack_is_sent_at_once_with_those_held_before_it() -> None:
    """Shadow, shadow, real, shadow, shadow buffered: the real ack ends the first send."""
    wakes = [*shadows("s", 2), make_wake("real"), *shadows("t", 2)]
    run = Scripted(wakes, [])
    assert await run.serve() == "eof"
    assert [ack_ids(sent) for sent in run.sock.sent] == [["s0", "s1", "real"], ["t0", "t1"]]


async def test_a_joined_frame_span_ends_at_the_joined_send(fake_clock: None) -> None:
    """Three joined frames' spans all end at the one send; a frame sent alone ends at its own."""
    run = Scripted(shadows("j", 3), [])
    assert await run.serve() == "eof"
    # stamps at ticks 0, 1, 2, the send returned at tick 3: spans of 3, 2 and 1 ticks
    assert [row.duration_ms * 1e6 for row in run.telemetry.rows] == [
        3 * TICK_NS,
        2 * TICK_NS,
        1 * TICK_NS,
    ]
    alone = Scripted([], [])
    one_frame_per_read(alone, [[wake] for wake in shadows("a", 2)])
    assert await alone.serve() == "eof"
    assert [row.duration_ms * 1e6 for row in alone.telemetry.rows] == [TICK_NS, TICK_NS]


async def test_cancelled_short_joined_send_counts_each_frame_without_its_whole_ack() -> None:
    """The joined send takes the first ack and 7 bytes, then cannot go on: frame 1 is recorded
    and fired, frames 2-6 are unacked."""
    run = Scripted(shadows("c", 6), [ack_length("c0") + 7])
    with trio.move_on_after(0.5) as scope:  # the rest can never be written: the socket is full
        await run.serve()
    assert scope.cancelled_caught
    assert run.recorded() == run.fired == ["c0"]
    assert (run.counters.frames, run.counters.accepted, run.counters.unacked) == (6, 6, 5)


async def test_short_joined_send_rest_closes_each_span_in_order() -> None:
    """A joined send the kernel takes in two parts: every ack arrives whole and in order."""
    run = Scripted(shadows("r", 3), [5], writable=True)
    assert await run.serve() == "eof"
    assert ack_ids(b"".join(run.sock.sent)) == ["r0", "r1", "r2"]
    assert run.recorded() == run.fired == ["r0", "r1", "r2"]
    assert (run.counters.frames, run.counters.unacked) == (3, 0)


async def test_peer_gone_at_a_joined_send_counts_its_frames_unacked() -> None:
    """Frame 1 read alone is acked; frames 2-4 read together meet a vanished peer: 3 unacked."""
    run = Scripted([], [-1, BrokenPipeError("gone")])
    one_frame_per_read(run, [shadows("g", 1), shadows("h", 3)])
    with pytest.raises(PeerGone):
        await run.serve()
    assert run.recorded() == run.fired == ["g0"]
    assert (run.counters.frames, run.counters.accepted, run.counters.unacked) == (4, 4, 3)
