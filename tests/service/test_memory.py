"""Resident memory of an ``executor serve`` process stays flat while frames keep coming.

The executor runs as a subprocess so its RSS (``VmRSS`` in ``/proc/<pid>/status``) is its own. A
warm-up count of frames fills every cache and pool (the allocator's arenas, SQLite's page cache,
the order template); after that the resident size may wobble but must not grow with the count.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from executor.wire.client import ExecutorClient, connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake
from tests.support.live import parse_counters, serving_executor

BATCH_FRAMES = 100
"""Frames pipelined per connection before reading their acks. Each unread ack is a small kernel
buffer of ~1 KiB true size, so a few hundred fill the socket: 500 deadlocks a client that writes
the whole batch before reading."""

CONNECTIONS = 2
"""Connections sending at once."""


def resident_kib(pid: int) -> int:
    """The process's resident set size in KiB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


async def send_frames(clients: list[ExecutorClient], start: int, count: int) -> None:
    """``count`` accepted frames spread over ``clients``, pipelined in batches, acks checked."""

    async def one(client: ExecutorClient, first: int, total: int) -> None:
        for offset in range(0, total, BATCH_FRAMES):
            ids = [f"mem-{first + offset + i}" for i in range(min(BATCH_FRAMES, total - offset))]
            await client.send_raw(
                b"".join(encode_frame(make_wake(cid, dry_run=True)) for cid in ids)
            )
            for cid in ids:
                ack = await client.receive_ack()
                assert (ack.status, ack.correlation_id) == ("accepted", cid)

    share = count // len(clients)
    async with trio.open_nursery() as senders:
        for index, client in enumerate(clients):
            senders.start_soon(one, client, start + index * share, share)


async def measure_growth(directory: Path, warm_up: int, total: int) -> tuple[int, int]:
    """RSS (KiB) of a fresh executor after ``warm_up`` frames and after ``total`` frames."""
    socket_path = directory / "x.sock"
    async with (
        serving_executor(directory) as process,
        connect(socket_path) as first,
        connect(socket_path) as second,
    ):
        clients = [first, second][:CONNECTIONS]
        await send_frames(clients, 0, warm_up)
        after_warm_up = resident_kib(process.pid)
        await send_frames(clients, warm_up, total - warm_up)
        after_total = resident_kib(process.pid)
    assert process.returncode == 0
    counters = parse_counters((directory / "stderr.txt").read_text())
    assert counters["accepted"] == total
    # A flood outruns SQLite: the channel may drop rows, but every one is accounted for.
    dropped = sum(value for key, value in counters.items() if key.startswith("dropped_"))
    assert counters["rows_written"] + dropped == total - counters["unacked"]
    print(
        f"executor RSS: {after_warm_up / 1024:.1f} MiB after {warm_up} frames, "
        f"{after_total / 1024:.1f} MiB after {total} "
        f"(+{(after_total - after_warm_up) / 1024:.2f} MiB); rows written "
        f"{counters['rows_written']}, dropped_ring_full {counters['dropped_ring_full']}"
    )
    return after_warm_up, after_total


async def test_memory_flat_over_20k_frames(short_dir: Path) -> None:
    """RSS after 20,000 frames is within 8 MiB of RSS after the first 2,000."""
    after_warm_up, after_total = await measure_growth(short_dir, 2_000, 20_000)
    assert after_total - after_warm_up <= 8 * 1024


@pytest.mark.slow
async def test_memory_flat_over_200k_frames(short_dir: Path) -> None:
    """RSS after 200,000 frames is within 16 MiB of RSS after the first 10,000 (the issue's)."""
    after_warm_up, after_total = await measure_growth(short_dir, 10_000, 200_000)
    assert after_total - after_warm_up <= 16 * 1024
