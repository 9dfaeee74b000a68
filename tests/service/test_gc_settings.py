"""The garbage collector's settings (``executor.runtime.gc_settings``, ``executor serve --gc``).

A served executor freezes its start-up heap and collects young objects every
``YOUNG_THRESHOLD`` allocations; ``--gc python`` and an in-process server built with the default
``ServerConfig`` leave the interpreter's collector alone. Cycles are collected either way. How
often a served executor collects depends on the interpreter's defaults (700 young allocations
before Python 3.13, 2000 since), so the served tests read the settings (``--metrics``), not
counts of collections.
"""

from __future__ import annotations

import gc
import signal
import socket
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from executor.runtime.gc_settings import YOUNG_THRESHOLD, settle_heap
from executor.wire.protocol import encode_frame
from tests.recording.test_metrics import scrape
from tests.support.inprocess import make_wake, start_server
from tests.support.processes import Spawner, metrics_port, open_client, receive_ack

FRAMES = 2_000
"""Frames sent to each served executor before its settings are read: enough for collections to
have run, which must not undo them."""

BATCH_FRAMES = 100
"""Frames written before their acks are read (a few hundred unread acks fill the socket)."""


class Node:
    """A container object that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """Put the collector back as it was: thresholds, frozen objects thawed, enabled."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        gc.enable()


def cycles(count: int) -> list[weakref.ref[Node]]:
    """``count`` two-node cycles with no other reference to them; a weak reference to each."""
    refs = []
    for _ in range(count):
        first, second = Node(), Node()
        first.other, second.other = second, first
        refs.append(weakref.ref(first))
    return refs


def test_settling_collects_start_up_cycles_freezes_the_rest_and_raises_the_threshold(
    restored_gc: None,
) -> None:
    """Garbage from before is collected (not frozen); what lives is frozen; only the young
    generation's threshold changes."""
    gc.disable()  # the cycle below must still be there when settle_heap runs
    (start_up_garbage,) = cycles(1)
    survivor = Node()
    gc.enable()
    _, middle, old = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    settle_heap()
    assert start_up_garbage() is None
    assert gc.get_freeze_count() > frozen_before
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)
    assert gc.is_tracked(survivor)


def test_cycles_made_after_settling_are_collected_without_being_asked(restored_gc: None) -> None:
    """Young collections still run on their own: after several thresholds' worth of cycles,
    some are gone though nothing called ``gc.collect``."""
    settle_heap()
    refs = cycles(3 * YOUNG_THRESHOLD)
    assert sum(ref() is None for ref in refs) > 0
    gc.collect()
    assert all(ref() is None for ref in refs)


async def test_an_in_process_server_leaves_the_collector_alone_by_default(
    nursery: trio.Nursery, short_dir: Path, restored_gc: None
) -> None:
    """The default ``ServerConfig`` (what an embedding process gets) changes nothing."""
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    running = await start_server(nursery, short_dir)
    assert (gc.get_threshold(), gc.get_freeze_count()) == (thresholds, frozen)
    await running.shutdown()


async def test_a_tuned_server_settles_the_heap_before_its_socket_is_reachable(
    nursery: trio.Nursery, short_dir: Path, restored_gc: None
) -> None:
    """By the time the socket accepts, the threshold is raised and the heap frozen."""
    frozen = gc.get_freeze_count()
    running = await start_server(nursery, short_dir, gc_mode="tuned")
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_freeze_count() > frozen
    await running.shutdown()


def served_gc_settings(spawner: Spawner, directory: Path, *extra: str) -> dict[str, float]:
    """The collector's gauges of a served executor, after ``FRAMES`` shadow wakes."""
    directory.mkdir()
    socket_path = directory / "x.sock"
    executor = spawner.serve(
        socket_path,
        directory / "t.db",
        *("--metrics", "127.0.0.1:0", "--log-format", "json", *extra),
    )
    with open_client(socket_path) as sock:
        send_frames(sock, FRAMES)
    samples = scrape(metrics_port(executor))
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    return {
        name: samples[f"trio_executor_gc_{name}"] for name in ("frozen_objects", "young_threshold")
    }


def send_frames(sock: socket.socket, count: int) -> None:
    """``count`` shadow wakes, pipelined in batches, every ack read and accepted."""
    wake = encode_frame(make_wake("gc", dry_run=True))
    for _ in range(0, count, BATCH_FRAMES):
        sock.sendall(wake * BATCH_FRAMES)
        for _ in range(BATCH_FRAMES):
            assert receive_ack(sock).status == "accepted"


def test_served_executor_settles_its_heap_and_gc_python_leaves_it(
    spawner: Spawner, short_dir: Path
) -> None:
    """``executor serve`` (``--gc tuned``, the default) has frozen its start-up heap and raised
    the young threshold, still so after serving frames; ``--gc python`` freezes nothing beyond what
    the interpreter starts with and keeps its own threshold (700 before Python 3.13, 2000 since)."""
    tuned = served_gc_settings(spawner, short_dir / "tuned")
    python = served_gc_settings(spawner, short_dir / "python", "--gc", "python")
    assert tuned["young_threshold"] == YOUNG_THRESHOLD
    assert tuned["frozen_objects"] > 10_000  # the modules and the built service
    assert python == {
        "frozen_objects": interpreter_freeze_count(),
        "young_threshold": interpreter_young_threshold(),
    }


def interpreter_freeze_count() -> int:
    """Objects a fresh interpreter (this one's version) starts with frozen: 0 on 3.11 and 3.13,
    375 on this machine's 3.12, which starts with objects in the permanent generation."""
    command = [sys.executable, "-c", "import gc; print(gc.get_freeze_count())"]
    return int(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def interpreter_young_threshold() -> int:
    """The young threshold a fresh interpreter (this one's version) starts with."""
    command = [sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"]
    return int(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
