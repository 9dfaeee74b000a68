"""A batch goes on past its size to a real wake behind it (``Connection.real_wake_ahead``).

A batch of pipelined frames stops at ``MAX_BATCH_FRAMES``, but not while a real wake's bytes wait
behind it, in the buffer or in the kernel: the frames up to the real wake are decoded and acked
(acks still joined at most ``ACK_JOIN_FRAMES`` to a send, in frame order), the real wake is fired,
and only then are the batch's rows recorded and its shadows held. Event-order tests over the
scripted sockets of ``test_batch_acks`` and ``test_real_first``, and a real socket pair for the
look itself: nothing here is timed.
"""

from __future__ import annotations

import socket
from pathlib import Path

from executor.wire.connection import (
    ACK_JOIN_FRAMES,
    MAX_BATCH_FRAMES,
    REAL_WAKE_MARK,
    Connection,
)
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake
from tests.wire.test_batch_acks import Scripted, ack_ids
from tests.wire.test_real_first import _ChunkedSocket, _serve_logging_fires

GOLDEN_FRAMES = Path(__file__).resolve().parents[2] / "golden" / "frames"

_SHADOWS_AHEAD = MAX_BATCH_FRAMES + 8  # the real wake is well past one batch's size


def _shadow_frames(count: int, prefix: str = "s") -> bytes:
    return b"".join(encode_frame(make_wake(f"{prefix}{i}", dry_run=True)) for i in range(count))


def _labels(run: Scripted, kind: str) -> list[str]:
    return [label for event, label in run.events if event == kind]


async def _served(chunks: list[bytes]) -> Scripted:
    run = Scripted([], [])
    run.sock = _ChunkedSocket(chunks, run)
    await _serve_logging_fires(run)
    return run


def _real_fired_before_any_row(run: Scripted) -> bool:
    first_row = next(i for i, (event, _) in enumerate(run.events) if event == "row")
    return run.events.index(("fire", "real")) < first_row


async def test_a_buffered_real_wake_past_the_batch_size_is_fired_before_any_row() -> None:
    """Forty shadows, a real wake and two more in one read: one batch up to the real wake, whose
    fire comes before every row; acks in frame order, at most ``ACK_JOIN_FRAMES`` a send."""
    behind = _shadow_frames(2, "t")
    run = await _served([_shadow_frames(_SHADOWS_AHEAD) + encode_frame(make_wake("real")) + behind])
    expected = [*(f"s{i}" for i in range(_SHADOWS_AHEAD)), "real", "t0", "t1"]
    assert ack_ids(b"".join(run.sock.sent)) == expected
    assert all(len(ack_ids(sent)) <= ACK_JOIN_FRAMES for sent in run.sock.sent)
    assert _real_fired_before_any_row(run)
    # The real wake's ack went out before its fire; the shadows fire last, in frame order.
    fire_at = run.events.index(("fire", "real"))
    sends_before = sum(1 for event, _ in run.events[:fire_at] if event == "send")
    assert ack_ids(b"".join(run.sock.sent[:sends_before]))[-1] == "real"
    assert _labels(run, "fire") == ["real", *(label for label in expected if label != "real")]
    assert _labels(run, "row") == expected


async def test_a_real_wake_still_in_the_kernel_is_read_ahead() -> None:
    """The real wake arrives in the next read's chunk: at the batch's size the look reads it in,
    and the batch goes on to it."""
    run = await _served([_shadow_frames(_SHADOWS_AHEAD), encode_frame(make_wake("real"))])
    assert ack_ids(b"".join(run.sock.sent)) == [
        *(f"s{i}" for i in range(_SHADOWS_AHEAD)),
        "real",
    ]
    assert _real_fired_before_any_row(run)


async def test_without_a_real_wake_a_batch_stops_at_its_size() -> None:
    """The twin: forty shadows alone make a batch of ``MAX_BATCH_FRAMES``, whose rows are recorded
    before the next frame's ack is sent."""
    run = await _served([_shadow_frames(_SHADOWS_AHEAD)])
    rows_before = [label for event, label in run.events[: _first_send_after(run)] if event == "row"]
    assert rows_before == [f"s{i}" for i in range(MAX_BATCH_FRAMES)]
    assert ack_ids(b"".join(run.sock.sent)) == [f"s{i}" for i in range(_SHADOWS_AHEAD)]


def _first_send_after(run: Scripted) -> int:
    """The index of the first send that follows a row (the second batch's first send)."""
    seen_row = False
    for index, (event, _) in enumerate(run.events):
        seen_row = seen_row or event == "row"
        if seen_row and event == "send":
            return index
    raise AssertionError(f"no send after a row: {run.events}")


def test_the_mark_is_in_every_real_wake_and_in_no_shadow() -> None:
    """The poller's bytes (this repository's golden frames and the encoder) carry the mark for a
    real wake and never for a shadow."""
    assert REAL_WAKE_MARK in encode_frame(make_wake("r"))
    assert REAL_WAKE_MARK not in encode_frame(make_wake("s", dry_run=True))
    golden = {path.name: path.read_bytes() for path in GOLDEN_FRAMES.glob("wake_*.frame")}
    assert golden, "no golden wake frames"
    for name, frame in golden.items():
        assert (REAL_WAKE_MARK in frame) == (b'"dry_run":true' not in frame), name


def test_the_look_finds_a_mark_split_across_reads_and_keeps_it_across_compaction() -> None:
    """On a real socket pair: nothing found in bytes without the mark; a mark whose bytes arrive
    in two reads is found once whole; compacting the buffer keeps it ahead of ``start``; once
    ``start`` is past it, it no longer counts."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        ours.setblocking(False)
        connection = Connection(ours)
        theirs.sendall(b"x" * 100)
        assert not connection.real_wake_ahead()
        assert connection.end == 100  # the look read what the kernel held
        theirs.sendall(b"y" + REAL_WAKE_MARK[:5])
        assert not connection.real_wake_ahead()
        theirs.sendall(REAL_WAKE_MARK[5:] + b"z")
        assert connection.real_wake_ahead()
        mark_at = 101
        assert bytes(connection.buffer[mark_at : mark_at + len(REAL_WAKE_MARK)]) == REAL_WAKE_MARK
        connection.start = 50
        connection.make_room(len(connection.buffer))  # moves the unconsumed bytes to the front
        assert connection.start == 0
        assert connection.real_wake_ahead()
        connection.start = mark_at - 50 + 1
        assert not connection.real_wake_ahead()
    finally:
        ours.close()
        theirs.close()
