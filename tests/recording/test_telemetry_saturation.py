"""The telemetry writer at a scripted saturation: every row lands in exactly one counter.

The writer is held inside its first batch (a gate in the worker thread) while a burst three times
the channel's capacity is recorded, so what fills, what drops and what each batch holds is decided
by the script, not by timing. Then the gate opens and the consumer drains. No timed assertion.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import executor.recording.consumer
from executor.recording.rows import TelemetryRow
from executor.recording.sqlite_writer import BatchOutcome, write_batch
from executor.telemetry import BATCH_MAX_ROWS, LatencyRow, Telemetry, serve_telemetry, wake_recv_row

CAPACITY = 1000
BURST = 3 * CAPACITY
GATE_TIMEOUT_S = 30.0
"""Bound on every wait for the gate (seconds); never a speed claim."""


class GatedWriter:
    """``write_batch`` that holds its first call until opened, and notes every batch's size."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.sizes: list[int] = []

    def __call__(
        self,
        connection: sqlite3.Connection,
        rows: list[TelemetryRow],
        between: Callable[[], None] | None = None,
    ) -> BatchOutcome:
        self.sizes.append(len(rows))
        self.entered.set()
        assert self.gate.wait(GATE_TIMEOUT_S), "the test never opened the gate"
        return write_batch(connection, rows, between)


def burst_row(index: int) -> LatencyRow:
    """Row ``index`` of the burst: every 97th id is oversized, every 89th cannot be bound."""
    if index % 97 == 0:
        correlation_id = "x" * 129
    elif index % 89 == 0:
        correlation_id = f"unbindable-\ud800-{index}"
    else:
        correlation_id = f"burst-{index:05d}"
    return wake_recv_row(correlation_id, 1_000 + index, 1_001 + index, 40_000 + index, True)


def written_ids(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [
            cid
            for (cid,) in db.execute(
                "SELECT e.correlation_id FROM latency_events e"
                " JOIN correlations c USING (correlation_id) ORDER BY e.id"
            )
        ]


async def test_saturated_writer_accounts_for_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst past capacity: counters add up, drops are counted, batches stay within 500 rows."""
    writer = GatedWriter()
    monkeypatch.setattr(executor.recording.consumer, "write_batch", writer)
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, capacity=CAPACITY, linger_s=0)
        )
        telemetry.record(wake_recv_row("first", 1, 2, 3, False))
        assert await trio.to_thread.run_sync(writer.entered.wait, GATE_TIMEOUT_S)
        # The first batch is in the writer and the consumer waits for rows: it takes the burst's
        # first row as it is recorded, the channel holds the next CAPACITY, the rest is dropped.
        burst = [burst_row(index) for index in range(BURST)]
        for row in burst:
            telemetry.record(row)
        during = telemetry.statistics()
        writer.gate.set()
        telemetry.close()
    final = telemetry.statistics()

    queued = burst[: 1 + CAPACITY]
    oversized = [r for r in queued if len(r.correlation_id) > 128]
    unbindable = [r for r in queued if "\ud800" in r.correlation_id]
    good = [r.correlation_id for r in queued if r not in oversized and r not in unbindable]
    assert (during.queued, during.dropped_ring_full) == (CAPACITY, BURST - CAPACITY - 1)
    assert final.dropped_ring_full == BURST - CAPACITY - 1
    assert final.dropped_oversized_id == len(oversized) > 0
    assert final.dropped_write_failed == len(unbindable) > 0
    assert final.rows_written == 1 + len(good)
    assert (
        final.rows_written
        + final.dropped_ring_full
        + final.dropped_oversized_id
        + final.dropped_write_failed
        == 1 + BURST
    )
    assert written_ids(path) == ["first", *good]
    assert max(writer.sizes) <= BATCH_MAX_ROWS
    assert sum(writer.sizes) == 1 + len(queued) - len(oversized)
    assert writer.sizes[:2] == [1, BATCH_MAX_ROWS]
    assert final.queued == 0


async def test_next_batch_is_handed_over_while_one_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the writer busy on one batch, the consumer already takes the next off the channel."""
    writer = GatedWriter()
    monkeypatch.setattr(executor.recording.consumer, "write_batch", writer)
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, linger_s=0)
        )
        telemetry.record(wake_recv_row("first", 1, 2, 3, False))
        assert await trio.to_thread.run_sync(writer.entered.wait, GATE_TIMEOUT_S)
        for index in range(1200):
            telemetry.record(wake_recv_row(f"next-{index}", 1, 2, 3, True))
        await trio.testing.wait_all_tasks_blocked()
        # One batch in the writer, the next handed over behind it, a third gathered and waiting
        # for a slot; only the rest is still in the channel (all 1200 without the hand-over).
        assert telemetry.statistics().queued == 1200 - 2 * BATCH_MAX_ROWS
        writer.gate.set()
        telemetry.close()
    assert telemetry.statistics().queued == 0
    assert writer.sizes == [1, BATCH_MAX_ROWS, BATCH_MAX_ROWS, 200]
    assert telemetry.statistics().rows_written == 1201
