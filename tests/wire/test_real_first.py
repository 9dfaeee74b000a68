"""A real wake is fired first: within one read batch, its order is decided and written before any
row of the batch is recorded and before any of the batch's shadow fires starts; acks stay in
frame order.

Event-order tests over the scripted socket of ``test_batch_acks`` and the fire path's fakes:
nothing here is timed.
"""

from __future__ import annotations

import functools
import socket
import time
from typing import cast

import trio

from executor.fire.path import FireOutcome
from executor.recording.rows import LatencyRow, OrderRowKind
from executor.telemetry import Telemetry
from executor.wire.connection import Connection, FrameCounters, serve_frames
from executor.wire.handoff import (
    MAX_DEFERRED_SHADOWS,
    SHADOW_CHECK_NS,
    Acked,
    FireHandoff,
    another_connection_waiting,
)
from executor.wire.protocol import WakeMessage, decode_wake, encode_frame
from tests.support.inprocess import make_wake
from tests.support.order_fakes import StartingPlacer, order_harness
from tests.wire.test_batch_acks import Events, RecordingTelemetry, Scripted, ack_ids
from tests.wire.test_batch_acks import ScriptedSocket as ScriptedSocketBase


class _EventTelemetry:
    def __init__(self, events: Events) -> None:
        self._events = events

    def record(self, row: LatencyRow) -> None:
        self._events.append(("row", row.correlation_id))

    def writer_keeping_up(self) -> bool:
        return False  # these tests count the loop's reads as they were


async def _serve_logging_fires(run: Scripted) -> None:
    def start_fire(message: WakeMessage, *stamps: int) -> None:
        run.events.append(("fire", message.correlation_id))

    try:
        await serve_frames(
            Connection(cast(socket.socket, run.sock)),
            counters=FrameCounters(),
            stats={"frames": 0, "accepted": 0, "rejected": 0},
            telemetry=cast(Telemetry, _EventTelemetry(run.events)),
            start_fire=start_fire,
            stopping=trio.Event(),
        )
    finally:
        run.close()


async def test_a_batchs_real_wakes_are_fired_before_its_rows_and_shadow_fires() -> None:
    """Acks go in frame order. A real wake ends its batch: its fire comes right after its ack
    (joined with the shadow acks before it), before the batch's rows and before the frames
    behind it are decoded; the shadows' fires come last, once nothing more is ready."""
    wakes = [
        make_wake("s0", dry_run=True),
        make_wake("r1"),
        make_wake("s2", dry_run=True),
        make_wake("r3"),
    ]
    run = Scripted(wakes, [])
    await _serve_logging_fires(run)
    # Pipelined shadow acks are joined with the next ack (executor.wire.batch): count the acks.
    assert ack_ids(b"".join(run.sock.sent)) == ["s0", "r1", "s2", "r3"]
    assert [ack_ids(sent) for sent in run.sock.sent] == [["s0", "r1"], ["s2", "r3"]]
    assert [event if event[0] != "send" else ("send", "") for event in run.events] == [
        ("send", ""),
        ("fire", "r1"),
        ("row", "s0"),
        ("row", "r1"),
        ("send", ""),
        ("fire", "r3"),
        ("row", "s2"),
        ("row", "r3"),
        ("fire", "s0"),
        ("fire", "s2"),
    ]


async def test_a_batch_of_shadows_only_keeps_frame_order() -> None:
    """The twin: with no real wake, rows and fires keep frame order (nothing is reordered)."""
    run = Scripted([make_wake(f"s{i}", dry_run=True) for i in range(3)], [])
    await _serve_logging_fires(run)
    fired = [label for kind, label in run.events if kind == "fire"]
    rows = [label for kind, label in run.events if kind == "row"]
    assert fired == rows == ["s0", "s1", "s2"]


async def test_start_writes_a_real_order_before_it_returns() -> None:
    """FirePath.start decides and writes a real order with no await; the rest reads the answer."""
    placer = StartingPlacer([], response={"order_id": "k-1", "fill_count": "1.00"})
    async with order_harness(placer=placer) as harness:
        rest = harness.fire_path.start(make_wake("r"), (1, 2))
        assert not isinstance(rest, FireOutcome)
        sent = [label for kind, label in harness.events if kind == "send"]
        assert len(sent) == 1  # written already, in the caller's own step
        (pending,) = harness.sink.orders
        assert pending.kind is OrderRowKind.PENDING and pending.client_order_id == sent[0]
        # the intent record before the first byte; the queued row after it (the record held it)
        order = [harness.events.index((kind, sent[0])) for kind in ("intent", "send", "pending")]
        assert order == sorted(order)
        assert await rest() is FireOutcome.FIRED
    resolution = harness.sink.orders[-1]
    assert resolution.kind is OrderRowKind.RESOLUTION and resolution.kalshi_order_id == "k-1"
    assert harness.fire_path.counters().fired == 1


async def test_start_leaves_the_write_to_the_task_when_the_transport_would_wait() -> None:
    """The twin: a transport that cannot write now sends from the fire's task, once."""
    placer = StartingPlacer([], can_start=False)
    async with order_harness(placer=placer) as harness:
        rest = harness.fire_path.start(make_wake("r"), None)
        assert not isinstance(rest, FireOutcome)
        assert not [event for event in harness.events if event[0] == "send"]
        assert await rest() is FireOutcome.FIRED
        assert len([event for event in harness.events if event[0] == "send"]) == 1


class _ChunkedSocket(ScriptedSocketBase):
    """A scripted socket whose reads hand over one scripted chunk each, then end-of-file."""

    def __init__(self, chunks: list[bytes], run: Scripted) -> None:
        super().__init__(b"", run.events, [], run._stuck)
        self._chunks = list(chunks)

    def recv_into(self, view: memoryview) -> int:
        if not self._chunks:
            return 0
        chunk = self._chunks.pop(0)
        view[: len(chunk)] = chunk
        return len(chunk)


async def test_a_later_real_wake_goes_before_the_shadows_of_batches_still_arriving() -> None:
    """Shadow fires wait while more frames are ready: a real wake read next is fired first."""
    run = Scripted([], [])
    first = b"".join(encode_frame(make_wake(f"s{i}", dry_run=True)) for i in (0, 1))
    second = encode_frame(make_wake("r2")) + encode_frame(make_wake("s3", dry_run=True))
    run.sock = _ChunkedSocket([first, second], run)
    await _serve_logging_fires(run)
    fired = [label for kind, label in run.events if kind == "fire"]
    assert fired == ["r2", "s0", "s1", "s3"]
    assert ack_ids(b"".join(run.sock.sent)) == ["s0", "s1", "r2", "s3"]


async def test_shadows_are_fired_at_once_when_nothing_more_is_ready() -> None:
    """The twin: when the next read finds nothing, a batch's shadows fire before it is read."""
    run = Scripted([], [])
    first = encode_frame(make_wake("s0", dry_run=True))
    run.sock = _ChunkedSocket([first, b"", encode_frame(make_wake("r1"))], run)
    await _serve_logging_fires(run)
    assert run.events == [
        ("send", "s0"),
        ("row", "s0"),
        ("fire", "s0"),
        ("send", "r1"),
        ("fire", "r1"),
        ("row", "r1"),
    ]


def _acked(wake: WakeMessage) -> Acked:
    return (decode_wake(encode_frame(wake)[4:]), 1, 0, 2)


def test_held_shadows_are_bounded() -> None:
    """Past MAX_DEFERRED_SHADOWS held, the oldest are started even while frames keep coming."""
    fired: list[str] = []
    handoff = FireHandoff(lambda message, *stamps: fired.append(message.correlation_id))
    shadows = [_acked(make_wake(f"s{i}", dry_run=True)) for i in range(MAX_DEFERRED_SHADOWS - 1)]
    handoff.hold_shadows(shadows)
    handoff.start_shadows(more_frames_waiting=lambda: True)
    assert fired == [] and handoff.deferred == MAX_DEFERRED_SHADOWS - 1  # room left: held
    handoff.hold_shadows([_acked(make_wake(f"late{i}", dry_run=True)) for i in range(3)])
    handoff.start_shadows(more_frames_waiting=lambda: True)
    assert fired == ["s0", "s1", "s2"]  # the oldest, until there is room again
    assert handoff.deferred == MAX_DEFERRED_SHADOWS - 1
    handoff.flush()
    assert len(fired) == MAX_DEFERRED_SHADOWS + 2 and fired[-1] == "late2"
    assert handoff.deferred == 0


def test_held_shadows_start_one_at_a_time_and_stop_when_a_frame_arrives() -> None:
    """With no time between lookings (``check_ns=0``) the check is made before each start: a
    frame that arrives while held shadows are being started leaves the rest held, in order, for
    after its batch."""
    fired: list[str] = []
    handoff = FireHandoff(lambda message, *stamps: fired.append(message.correlation_id), check_ns=0)
    handoff.hold_shadows([_acked(make_wake(f"s{i}", dry_run=True)) for i in range(5)])
    asked: list[int] = []

    def frame_after_two_starts() -> bool:
        asked.append(len(fired))
        return len(fired) == 2

    handoff.start_shadows(more_frames_waiting=frame_after_two_starts)
    assert fired == ["s0", "s1"] and asked == [0, 1, 2]
    assert handoff.deferred == 3
    handoff.start_shadows(more_frames_waiting=lambda: False)
    assert fired == ["s0", "s1", "s2", "s3", "s4"] and handoff.deferred == 0


def test_held_shadows_look_for_a_frame_again_only_after_the_check_interval() -> None:
    """Starting a shadow takes far less than an hour: with ``check_ns`` an hour, the connection
    looks once, before the first start, and starts every held shadow."""
    fired: list[str] = []
    handoff = FireHandoff(
        lambda message, *stamps: fired.append(message.correlation_id), check_ns=3600 * 10**9
    )
    handoff.hold_shadows([_acked(make_wake(f"s{i}", dry_run=True)) for i in range(5)])
    asked: list[int] = []

    def frame_after_the_first_look() -> bool:
        asked.append(len(fired))
        return len(asked) > 1

    handoff.start_shadows(more_frames_waiting=frame_after_the_first_look)
    assert asked == [0] and fired == ["s0", "s1", "s2", "s3", "s4"]


def test_held_shadows_give_way_to_other_connections_between_starts() -> None:
    """With other connections open, a call stops once the check interval has passed since its
    first start (after one start with ``check_ns=0``), leaving the rest held in order, and says
    so; alone, it starts them all. A frame of its own still comes first."""
    fired: list[str] = []
    handoff = FireHandoff(lambda message, *stamps: fired.append(message.correlation_id), check_ns=0)
    handoff.hold_shadows([_acked(make_wake(f"s{i}", dry_run=True)) for i in range(4)])
    never = lambda: False  # noqa: E731
    assert handoff.start_shadows(more_frames_waiting=never, others_waiting=lambda: True)
    assert fired == ["s0"] and handoff.deferred == 3
    assert handoff.start_shadows(more_frames_waiting=never, others_waiting=lambda: True)
    assert fired == ["s0", "s1"]
    assert not handoff.start_shadows(more_frames_waiting=lambda: True, others_waiting=never)
    assert fired == ["s0", "s1"] and handoff.deferred == 2
    assert not handoff.start_shadows(more_frames_waiting=never, others_waiting=never)
    assert fired == ["s0", "s1", "s2", "s3"] and handoff.deferred == 0


def test_starts_past_the_bound_take_no_turns() -> None:
    """Held past MAX_DEFERRED_SHADOWS, the oldest are started to make room without handing the
    loop to the other connections (at most a batch of them: the bound a batch already sets)."""
    fired: list[str] = []
    handoff = FireHandoff(lambda message, *stamps: fired.append(message.correlation_id), check_ns=0)
    count = MAX_DEFERRED_SHADOWS + 2
    handoff.hold_shadows([_acked(make_wake(f"s{i}", dry_run=True)) for i in range(count)])
    stopped_for_others = handoff.start_shadows(
        more_frames_waiting=lambda: True, others_waiting=lambda: True
    )
    assert not stopped_for_others  # it stopped for its own waiting frame, once under the bound
    assert fired == ["s0", "s1", "s2"] and handoff.deferred == MAX_DEFERRED_SHADOWS - 1
    handoff.flush()


def _busy_for(nanoseconds: int) -> None:
    until = time.perf_counter_ns() + nanoseconds
    while time.perf_counter_ns() < until:
        pass


async def test_a_real_wake_on_another_connection_waits_for_one_shadow_not_all() -> None:
    """Two connections: while the first starts ten held shadow fires, each slower than the check
    interval, a real wake written to the second (during the first start) is fired after at most
    two of them: the first connection hands the loop over between starts."""
    fired: list[str] = []
    all_fired = trio.Event()
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    (shadow_side, shadow_peer), (real_side, real_peer) = pairs

    def start_fire(message: WakeMessage, *stamps: int) -> None:
        fired.append(message.correlation_id)
        if message.correlation_id == "s0":
            real_peer.sendall(encode_frame(make_wake("real")))
        if message.dry_run:
            _busy_for(2 * SHADOW_CHECK_NS)
        if len(fired) == 11:
            all_fired.set()

    connections = {Connection(shadow_side), Connection(real_side)}
    try:
        async with trio.open_nursery() as nursery:
            for connection in connections:
                connection.sock.setblocking(False)
                serve = functools.partial(
                    serve_frames,
                    connection,
                    counters=FrameCounters(),
                    stats={"frames": 0, "accepted": 0, "rejected": 0},
                    telemetry=cast(Telemetry, RecordingTelemetry()),
                    start_fire=start_fire,
                    stopping=trio.Event(),
                    others_waiting=functools.partial(
                        another_connection_waiting, connections, connection
                    ),
                )
                nursery.start_soon(serve)
            shadow_peer.sendall(
                b"".join(encode_frame(make_wake(f"s{i}", dry_run=True)) for i in range(10))
            )
            with trio.fail_after(10):
                await all_fired.wait()
            shadow_peer.close()
            real_peer.close()  # end of stream: both loops return
    finally:
        for sock in (shadow_side, real_side, shadow_peer, real_peer):
            sock.close()
    assert sorted(fired) == sorted(["real", *(f"s{i}" for i in range(10))])
    assert fired.index("real") <= 2, fired


class _Peer:
    def __init__(self, sock: socket.socket, *, idle: bool) -> None:
        self.sock = sock
        self.idle = idle


def test_another_connection_is_waiting_when_it_is_busy_or_has_bytes() -> None:
    """Only the others count; one whose task is not waiting for a frame counts; an idle one
    counts once its socket holds bytes, which the look leaves in place."""
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3)]
    try:
        this, quiet, other = (_Peer(ours, idle=True) for ours, _ in pairs)
        pairs[0][1].sendall(b"this one's own bytes do not count")
        assert not another_connection_waiting([this, quiet, other], this)
        pairs[2][1].sendall(b"x")
        assert another_connection_waiting([this, quiet, other], this)
        assert other.sock.recv(16) == b"x"  # the look read nothing
        assert not another_connection_waiting([this, quiet, other], this)
        quiet.idle = False
        assert another_connection_waiting([this, quiet, other], this)
    finally:
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
