"""``executor serve --frame-spans``: each acked frame also gets a ``wake_frame`` row, its own span.

``wake_recv`` ends when the frame's own ack was handed to the kernel, so a frame whose ack was
joined with the next ones also holds their decode and the joined ``send`` (issue 34). The frame's
own span, ``wake_frame``, runs from the same stamp to its own ack encoded. Here ``perf_counter_ns``
is a counter that moves one tick per call, so each span's length says exactly which stamps it
holds: a frame's own span holds none but its own, whatever follows it in its join.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from executor.recording.rows import LatencyRow, Stage
from executor.wire.connection import PeerGone
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake
from tests.wire.test_batch_acks import Scripted

TICK_NS = 1_000
"""How far the counting clock moves per ``perf_counter_ns`` call (ns)."""


@pytest.fixture
def counting_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``time.perf_counter_ns`` moves ``TICK_NS`` per call (Trio's own clock is not this one)."""
    ticks = iter(range(10**9, 10**12, TICK_NS))
    monkeypatch.setattr(time, "perf_counter_ns", lambda: next(ticks))
    yield


def rows_of(run: Scripted, stage: Stage) -> list[LatencyRow]:
    return [row for row in run.telemetry.rows if row.stage is stage]


def ticks(rows: list[LatencyRow]) -> list[tuple[str, float]]:
    """(correlation id, span in ticks) per row."""
    return [(row.correlation_id, row.duration_ms * 1_000_000 / TICK_NS) for row in rows]


@pytest.mark.usefixtures("counting_clock")
async def test_a_joined_frames_own_span_ends_at_its_own_ack() -> None:
    """Three pipelined shadows share one ``send``: their ``wake_recv`` spans hold the later frames'
    stamps and the send (6, 4, 2 ticks), their own spans one tick each (stamp -> own ack)."""
    run = Scripted([make_wake(f"s{i}", dry_run=True) for i in range(3)], [])
    assert await run.serve(frame_spans=True) == "eof"
    assert len(run.sock.sent) == 1  # one joined send
    assert ticks(rows_of(run, Stage.WAKE_RECV)) == [("s0", 6), ("s1", 4), ("s2", 2)]
    assert ticks(rows_of(run, Stage.WAKE_FRAME)) == [("s0", 1), ("s1", 1), ("s2", 1)]


@pytest.mark.usefixtures("counting_clock")
async def test_a_frame_acked_alone_has_its_send_only_in_wake_recv() -> None:
    """Real wakes are acked alone: ``wake_recv`` holds stamp, own ack and send (2 ticks), the
    own span 1."""
    run = Scripted([make_wake("r0"), make_wake("r1")], [])
    assert await run.serve(frame_spans=True) == "eof"
    assert ticks(rows_of(run, Stage.WAKE_RECV)) == [("r0", 2), ("r1", 2)]
    assert ticks(rows_of(run, Stage.WAKE_FRAME)) == [("r0", 1), ("r1", 1)]


async def test_the_frame_row_carries_its_wake_recv_rows_columns() -> None:
    """Beside its span, a ``wake_frame`` row is its frame's ``wake_recv`` row: id, times and
    metadata."""
    run = Scripted([make_wake("a", dry_run=True), make_wake("b")], [])
    assert await run.serve(frame_spans=True) == "eof"
    received, own = rows_of(run, Stage.WAKE_RECV), rows_of(run, Stage.WAKE_FRAME)
    assert len(run.telemetry.rows) == 4
    assert [row._replace(stage=Stage.WAKE_RECV, duration_ms=0) for row in own] == [
        row._replace(duration_ms=0) for row in received
    ]
    assert [row.metadata_json for row in own] == ['{"dry_run": true}', '{"dry_run": false}']
    pairs = zip(own, received, strict=True)
    assert all(0 < mine.duration_ms <= row.duration_ms for mine, row in pairs)


@pytest.mark.usefixtures("counting_clock")
async def test_a_rejected_frame_in_a_join_has_no_row_and_shifts_none() -> None:
    """A frame that fails its decode is acked (rejected) in the join but gets no row of either
    stage; the frame after it still gets its own span, not the rejected one's."""
    bad = (2).to_bytes(4, "big") + b"{}"
    first, last = (encode_frame(make_wake(name, dry_run=True)) for name in ("a", "b"))
    wakes = first + bad + last
    run = Scripted(wakes, [])
    assert await run.serve(frame_spans=True) == "eof"
    assert run.counters.rejected == 1
    # a: stamp 0, encoded 1; the bad frame: stamp 2; b: stamp 3, encoded 4; the send 5.
    assert ticks(rows_of(run, Stage.WAKE_RECV)) == [("a", 5), ("b", 2)]
    assert ticks(rows_of(run, Stage.WAKE_FRAME)) == [("a", 1), ("b", 1)]


async def test_a_frame_whose_ack_never_left_has_no_frame_row() -> None:
    """The peer gone at the second ack: only the first frame, acked, gets its rows."""
    run = Scripted([make_wake(f"gone{i}") for i in range(4)], [-1, BrokenPipeError("gone")])
    with pytest.raises(PeerGone):
        await run.serve(frame_spans=True)
    assert [row.correlation_id for row in rows_of(run, Stage.WAKE_FRAME)] == ["gone0"]
    assert run.counters.unacked == 1


async def test_without_frame_spans_only_wake_recv_is_recorded() -> None:
    """The default: one ``wake_recv`` row per acked frame and nothing else."""
    run = Scripted([make_wake(f"s{i}", dry_run=True) for i in range(3)], [])
    assert await run.serve() == "eof"
    assert {row.stage for row in run.telemetry.rows} == {Stage.WAKE_RECV}
    assert len(run.telemetry.rows) == 3
