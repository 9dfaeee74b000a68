"""The garbage collector's settings (``executor.gc_settings``, ``executor serve --gc``).

A served executor freezes its start-up heap and collects young objects every
``YOUNG_THRESHOLD`` allocations; ``--gc python`` and an in-process server built with the default
``ServerConfig`` leave the interpreter's collector alone. Cycles are collected either way.
"""

from __future__ import annotations

import gc
import signal
import socket
import urllib.request
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from executor.gc_settings import YOUNG_THRESHOLD, settle_heap
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake, start_server
from tests.support.processes import Spawner, metrics_port, open_client, receive_ack

FRAMES = 80_000
"""Frames sent to each served executor: with the interpreter's threshold of 700 they ran 38-111
young collections in three tries when this was written, the tuned threshold 2-4."""

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


def young_collections(port: int) -> float:
    """``python_gc_collections_total{generation="0"}`` from the executor's metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name, sample.labels.get("generation")) == (
                "python_gc_collections_total",
                "0",
            ):
                return sample.value
    raise AssertionError("no python_gc_collections_total{generation=0} in the scrape")


def send_frames(sock: socket.socket, count: int) -> None:
    """``count`` shadow wakes, pipelined in batches, every ack read and accepted."""
    wake = encode_frame(make_wake("gc", dry_run=True))
    for _ in range(0, count, BATCH_FRAMES):
        sock.sendall(wake * BATCH_FRAMES)
        for _ in range(BATCH_FRAMES):
            assert receive_ack(sock).status == "accepted"


def collections_while_serving(spawner: Spawner, directory: Path, *extra: str) -> float:
    """Young collections a served executor ran over ``FRAMES`` frames (scraped before and after)."""
    directory.mkdir()
    socket_path = directory / "x.sock"
    executor = spawner.serve(
        socket_path,
        directory / "t.db",
        *("--metrics", "127.0.0.1:0", "--log-format", "json", *extra),
    )
    port = metrics_port(executor)
    before = young_collections(port)
    with open_client(socket_path) as sock:
        send_frames(sock, FRAMES)
    after = young_collections(port)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    return after - before


def test_served_executor_collects_far_less_often_than_the_interpreter_would(
    spawner: Spawner, short_dir: Path
) -> None:
    """``executor serve`` (``--gc tuned``, the default) against ``--gc python``, the same frames:
    the interpreter's threshold runs young collections by the hundred, the tuned one a handful."""
    python = collections_while_serving(spawner, short_dir / "python", "--gc", "python")
    tuned = collections_while_serving(spawner, short_dir / "tuned")
    assert python >= 20, python
    assert tuned * 5 <= python, (tuned, python)
