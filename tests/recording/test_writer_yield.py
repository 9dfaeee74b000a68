"""The telemetry writer yields to the event loop while its backlog is small
(``executor.recording.writer_yield``, ``executor.runtime.loop_watch``; ``executor serve
--writer-priority yield``, the default).

The watch reads a thread's scheduler state from ``/proc``; the batch's yield sleeps while the
watched thread is runnable, within a backlog bound and a time budget; ``write_batch`` calls it
before the transaction and before each slice of latency rows, and stores the same rows as without
it. Nothing here is timed: the clock and the sleep of :class:`BatchYield` are the test's, and the
threads whose state is read are polled until they reach it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import trio

import executor.recording.consumer
import executor.recording.writer_yield
from executor.recording.database import open_database
from executor.recording.rows import LatencyRow, TelemetryRow, wake_recv_row
from executor.recording.sqlite_writer import write_batch
from executor.recording.writer_yield import (
    YIELD_BUDGET_S,
    YIELD_NAP_S,
    YIELD_SLICE_ROWS,
    BatchYield,
)
from executor.runtime.loop_watch import LoopWatch
from executor.telemetry import Telemetry, serve_telemetry
from tests.support.rows import order_row

STATE_DEADLINE_S = 10.0
"""Longest a test waits for a thread to reach the state it is checking (a bound, not a figure)."""

linux_only = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="a thread's state is read from Linux's /proc"
)


# --- the watch ---


@linux_only
def test_the_calling_thread_is_runnable_while_it_looks() -> None:
    """A thread reading its own state is running: ``R``."""
    watch = LoopWatch.of_thread(threading.get_native_id())
    assert watch is not None
    try:
        assert watch.native_id == threading.get_native_id()
        assert watch.runnable()
    finally:
        watch.close()


@linux_only
def test_a_sleeping_thread_is_not_runnable_and_an_ended_one_neither() -> None:
    """A thread blocked on an event is asleep (not runnable); once it has ended, or the watch is
    closed, the watch says not runnable instead of failing."""
    watches: list[LoopWatch | None] = []
    release = threading.Event()

    def body() -> None:
        watches.append(LoopWatch.of_thread(threading.get_native_id()))
        release.wait(STATE_DEADLINE_S)

    thread = threading.Thread(target=body)
    thread.start()
    try:
        deadline = time.monotonic() + STATE_DEADLINE_S
        while not watches:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        watch = watches[0]
        assert watch is not None
        while watch.runnable():  # it may still be on its way to the wait
            assert time.monotonic() < deadline, "the waiting thread never slept"
            time.sleep(0.001)
    finally:
        release.set()
        thread.join()
    # join() returns before the kernel has finished the thread (it shows R while it exits);
    # once finished, its state cannot be read, and the watch says not runnable.
    while watch.runnable():
        assert time.monotonic() < deadline, "the ended thread still reads as runnable"
        time.sleep(0.001)
    watch.close()
    assert not watch.runnable()  # closed
    watch.close()  # twice is harmless


def test_without_proc_there_is_no_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel gives no per-thread state the writer gets no watch (and never yields)."""

    def no_proc(*_: object) -> int:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "open", no_proc)
    assert LoopWatch.of_thread(threading.get_native_id()) is None


# --- a batch's yield ---


class FakeWatch:
    """Runnable for the first ``busy_looks`` looks, then not; counts the looks."""

    def __init__(self, busy_looks: int) -> None:
        self.busy_looks = busy_looks
        self.looks = 0

    def runnable(self) -> bool:
        self.looks += 1
        return self.looks <= self.busy_looks


class FakeTime:
    """A clock that only the fake sleep moves, and a list of the sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def batch_yield(
    watch: FakeWatch, fake: FakeTime, backlog: list[int], below: int = 100
) -> BatchYield:
    """A :class:`BatchYield` on the fakes; ``backlog[0]`` is the backlog it reads."""
    return BatchYield(watch, lambda: backlog[0], below, clock=fake.clock, sleep=fake.sleep)


def test_an_idle_loop_is_not_waited_for() -> None:
    """The loop asleep: one look, no sleep."""
    watch, fake = FakeWatch(busy_looks=0), FakeTime()
    gentle = batch_yield(watch, fake, [0])
    gentle()
    assert (watch.looks, fake.sleeps) == (1, [])


def test_a_busy_loop_is_waited_for_in_naps() -> None:
    """While the loop stays runnable the writer sleeps ``YIELD_NAP_S`` at a time; it goes on as
    soon as the loop is not runnable."""
    watch, fake = FakeWatch(busy_looks=6), FakeTime()
    gentle = batch_yield(watch, fake, [0])
    gentle()
    assert fake.sleeps == [YIELD_NAP_S] * 6
    assert watch.looks == 7


def test_a_large_backlog_is_never_held_back() -> None:
    """From ``below`` queued rows on, the writer neither waits nor slices: the loop is not even
    looked at."""
    watch, fake = FakeWatch(busy_looks=1_000), FakeTime()
    gentle = batch_yield(watch, fake, [100], below=100)
    assert not gentle.worth_slicing()
    gentle()
    assert (watch.looks, fake.sleeps) == (0, [])
    assert batch_yield(watch, fake, [99], below=100).worth_slicing()


def test_a_backlog_that_grows_while_waiting_ends_the_wait() -> None:
    """Rows arriving while the writer waits stop the wait once they reach the bound."""
    watch, fake = FakeWatch(busy_looks=1_000), FakeTime()
    backlog = [0]

    def sleep(seconds: float) -> None:
        fake.sleep(seconds)
        backlog[0] += 40

    gentle = BatchYield(watch, lambda: backlog[0], 100, clock=fake.clock, sleep=sleep)
    gentle()
    assert len(fake.sleeps) == 3  # 40, 80, then 120 >= 100
    assert backlog[0] == 120


def test_a_batch_waits_at_most_its_budget_in_all() -> None:
    """A loop runnable for ever is waited for at most ``YIELD_BUDGET_S`` per batch, across every
    slice of it: once spent, later looks return without a sleep."""
    watch, fake = FakeWatch(busy_looks=1_000_000), FakeTime()
    gentle = batch_yield(watch, fake, [0])
    gentle()
    spent = sum(fake.sleeps)
    assert YIELD_BUDGET_S <= spent < YIELD_BUDGET_S + YIELD_NAP_S
    naps = len(fake.sleeps)
    gentle()  # the next slice of the same batch
    assert len(fake.sleeps) == naps
    fresh = batch_yield(watch, fake, [0])  # the next batch has a budget of its own
    fresh()
    assert len(fake.sleeps) > naps


# --- the writer's slices ---


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    with tempfile.TemporaryDirectory(prefix="writer-yield-") as directory:
        opened, _ = open_database(Path(directory) / "telemetry.db")
        with contextlib.closing(opened):
            yield opened


def rows_of(count: int, prefix: str) -> list[LatencyRow]:
    return [
        wake_recv_row(f"{prefix}-{index}", 1_000 + index, 1_001 + index, 50_000 + index, False)
        for index in range(count)
    ]


def stored(connection: sqlite3.Connection) -> list[tuple[object, ...]]:
    return connection.execute(
        "SELECT correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json"
        " FROM latency_events ORDER BY id"
    ).fetchall()


def test_between_is_called_before_the_transaction_and_each_slice(
    connection: sqlite3.Connection,
) -> None:
    """150 latency rows, an order row, 70 more: ``between`` runs once before BEGIN, then before
    each slice of at most ``YIELD_SLICE_ROWS`` rows of each run, inside the one transaction; the
    rows land in order, committed as one batch."""
    assert YIELD_SLICE_ROWS == 64
    first, second = rows_of(150, "a"), rows_of(70, "b")
    batch: list[TelemetryRow] = [*first, order_row(), *second]
    in_transaction: list[bool] = []
    outcome = write_batch(
        connection, batch, between=lambda: in_transaction.append(connection.in_transaction)
    )
    # before BEGIN; 150 rows in 3 slices; 70 rows in 2
    assert in_transaction == [False, True, True, True, True, True]
    assert outcome.committed_as_batch
    assert (outcome.rows_written, outcome.order_rows_written) == (220, 1)
    assert [row[0] for row in stored(connection)] == [
        row.correlation_id for row in (*first, *second)
    ]


def test_sliced_rows_are_stored_as_the_whole_batch_would_be() -> None:
    """The same 500 rows written with and without slices store the same values."""
    rows: list[TelemetryRow] = list(rows_of(500, "s"))
    results = []
    for between in (None, lambda: None):
        with tempfile.TemporaryDirectory(prefix="writer-yield-") as directory:
            opened, _ = open_database(Path(directory) / "telemetry.db")
            with contextlib.closing(opened):
                assert write_batch(opened, rows, between).rows_written == 500
                results.append(stored(opened))
    assert results[0] == results[1]
    assert len(results[0]) == 500


def test_a_bad_row_in_a_later_slice_still_falls_back_row_by_row(
    connection: sqlite3.Connection,
) -> None:
    """A row JSON cannot carry, in the second slice: the whole transaction is rolled back and the
    rows retried one by one, as without slices; only that row is lost, and counted."""
    rows: list[TelemetryRow] = list(rows_of(100, "r"))
    bad = rows_of(1, "bad-\ud800")[0]
    rows[80] = bad
    calls: list[int] = []
    outcome = write_batch(connection, rows, between=lambda: calls.append(1))
    assert not outcome.committed_as_batch
    assert outcome.rows_written == 99
    assert [error_id for error_id, _ in outcome.failures] == [bad.correlation_id]
    assert len(calls) == 3  # before BEGIN and both slices; the row-by-row retry does not yield
    assert len(stored(connection)) == 99


# --- the consumer ---


class RecordingWatch:
    """Stands in for :class:`LoopWatch` in a served consumer: always runnable; notes its looks
    and its closing."""

    made: ClassVar[list[RecordingWatch]] = []

    def __init__(self) -> None:
        self.looks = 0
        self.closed = False

    @classmethod
    def of_thread(cls, native_id: int) -> RecordingWatch:
        watch = cls()
        cls.made.append(watch)
        return watch

    def runnable(self) -> bool:
        self.looks += 1
        return True

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("priority", ["yield", "normal"])
async def test_the_consumer_yields_only_by_default_and_still_writes_every_row(
    priority: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``yield`` (the default) the writer looks at the loop's thread before its batches and
    slices, and writes every row although the stand-in says the loop is always runnable (each
    batch waits out its budget, a short one here); the watch is closed at the end. With
    ``normal`` there is no watch."""
    RecordingWatch.made = []
    monkeypatch.setattr(executor.recording.consumer, "LoopWatch", RecordingWatch)
    monkeypatch.setattr(
        executor.recording.consumer,
        "BatchYield",
        functools.partial(executor.recording.writer_yield.BatchYield, budget_s=0.001),
    )
    rows = rows_of(700, "c")
    path = tmp_path / "telemetry.db"
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, writer_priority=priority)  # type: ignore[arg-type]
        )
        for row in rows:
            telemetry.record(row)
        telemetry.close()
    assert telemetry.statistics().rows_written == 700
    with contextlib.closing(sqlite3.connect(path)) as check:
        assert check.execute("SELECT COUNT(*) FROM latency_events").fetchone()[0] == 700
    if priority == "yield":
        [watch] = RecordingWatch.made
        assert watch.looks > 0
        assert watch.closed
    else:
        assert RecordingWatch.made == []


# --- the loop's question: is the writer keeping up? ---


async def test_the_writer_keeps_up_below_a_quarter_of_the_channel(tmp_path: Path) -> None:
    """``Telemetry.writer_keeping_up`` is True while fewer rows than a quarter of the channel
    wait in it, False from there on (rows recorded without a checkpoint stay queued, but for one
    a waiting consumer may have taken)."""
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, tmp_path / "telemetry.db", capacity=40)
        )
        seen: list[tuple[int, bool]] = []
        for row in rows_of(12, "k"):
            telemetry.record(row)
            seen.append((telemetry.statistics().queued, telemetry.writer_keeping_up()))
        telemetry.close()
    assert all(keeping_up == (queued < 40 // 4) for queued, keeping_up in seen)
    assert {keeping_up for _, keeping_up in seen} == {True, False}
    assert telemetry.statistics().rows_written == 12
