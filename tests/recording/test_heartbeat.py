"""The heartbeat writer (``executor.recording.heartbeat``), against an in-test sink."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import trio
import trio.testing

from executor.recording.heartbeat import (
    HEARTBEAT_INTERVAL_S,
    heartbeat_process_for,
    serve_heartbeats,
)
from executor.recording.rows import HeartbeatRow
from tests.support.order_fakes import RecordingSink


async def test_heartbeat_rows_every_interval(autojump_clock: trio.testing.MockClock) -> None:
    """A heartbeat row is written at start and every interval, with this process's pid."""
    sink = RecordingSink([])
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_heartbeats, sink, lambda: 7, lambda: 2)
        await trio.sleep(HEARTBEAT_INTERVAL_S * 2 + 1)
        nursery.cancel_scope.cancel()
    beats = [row for row in sink.orders if isinstance(row, HeartbeatRow)]
    assert len(beats) == 3
    assert {(b.process, b.pid, b.queue_depth, b.dropped_rows) for b in beats} == {
        ("executor", os.getpid(), 7, 2)
    }
    assert len({b.started_at_ms for b in beats}) == 1


async def test_heartbeat_rows_carry_the_lookups_unknown_count(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Given a ``lookups_unknown`` source, each row carries its value at that beat."""
    sink = RecordingSink([])
    unknown = iter([4, 9])
    async with trio.open_nursery() as nursery:
        beat = functools.partial(serve_heartbeats, lookups_unknown=lambda: next(unknown))
        await nursery.start(beat, sink, lambda: 0, lambda: 0)
        await trio.sleep(HEARTBEAT_INTERVAL_S + 1)
        nursery.cancel_scope.cancel()
    beats = [row for row in sink.orders if isinstance(row, HeartbeatRow)]
    assert [beat.lookups_unknown for beat in beats] == [4, 9]


def test_the_process_names_the_instance_by_its_socket(tmp_path: Path) -> None:
    """The heartbeat's process is ``executor:`` and the socket's absolute path."""
    socket_path = tmp_path / "x.sock"
    assert heartbeat_process_for(socket_path) == f"executor:{os.path.abspath(socket_path)}"
