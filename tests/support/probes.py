"""Probes of an in-process executor: open descriptors, Trio tasks, settling to a baseline."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

import trio
import trio.testing

from executor.wire.client import ExecutorClient
from tests.support.inprocess import RunningServer, make_wake

SETTLE_TIMEOUT_S = 10.0
"""Upper bound on waiting for the server to notice vanished peers (a hang guard, not a timing)."""


SETTLE_POLL_S = 0.005
"""Polling interval while settling (seconds)."""


FdSet = frozenset[tuple[str, str]]
"""Open descriptors as (number, what it points at): a descriptor closed and its number reused for
something else is a different member."""


def fd_set() -> FdSet:
    """This process's open descriptors (the listing's own, under ``/proc``, left out)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(f"/proc/self/fd/{name}")
            if not target.startswith("/proc/"):
                found.add((name, target))
    return frozenset(found)


def opened_since(baseline: FdSet) -> int:
    """Descriptors open now that were not at ``baseline``: what the test opened, whatever an
    earlier test of this worker process closes meanwhile (its garbage, its threads)."""
    return len(fd_set() - baseline)


def describe_fds() -> list[str]:
    """What each open descriptor points at (for a failure message)."""
    described = []
    for fd in os.listdir("/proc/self/fd"):
        # The listing's own descriptor is closed by the time it is read.
        with contextlib.suppress(OSError):
            described.append(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
    return sorted(described, key=lambda item: int(item.split(":")[0]))


def trio_tasks() -> int:
    """Every live Trio task, found by walking the task tree from the root."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    count = 0
    pending = [root]
    while pending:
        task = pending.pop()
        count += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return count


async def settle(condition: Callable[[], bool], what: str) -> None:
    """Poll (bounded) until ``condition`` holds, letting the server run in between."""
    polls = int(SETTLE_TIMEOUT_S / SETTLE_POLL_S)
    for _ in range(polls):
        if condition():
            return
        await trio.sleep(SETTLE_POLL_S)
    assert condition(), f"did not settle: {what}; open fds: {describe_fds()}"


async def settle_to_baseline(running: RunningServer, fds: FdSet, tasks: int, open_: int) -> None:
    """Wait until descriptors, tasks and open connections are back to the given baseline (every
    descriptor opened since it closed again)."""
    await settle(lambda: running.server.statistics().connections_open == open_, "connections")
    await settle(lambda: opened_since(fds) == 0, "descriptors opened since the baseline")
    await settle(lambda: trio_tasks() == tasks, f"tasks {trio_tasks()} != {tasks}")


async def warm_up(running: RunningServer, client: ExecutorClient) -> tuple[FdSet, int]:
    """A few round trips and their rows committed (SQLite opens its WAL files on the first
    commit); then the baseline descriptor and task counts."""
    await checked_requests(client, "warm", 3)
    telemetry = running.server.telemetry
    await settle(lambda: telemetry.statistics().rows_written >= 3, "warm-up rows written")
    await trio.testing.wait_all_tasks_blocked()
    return fd_set(), trio_tasks()


async def checked_requests(client: ExecutorClient, label: str, count: int) -> None:
    """``count`` round trips on a well-behaved connection, each accepted with its own id."""
    for index in range(count):
        ack = await client.request(make_wake(f"{label}-{index}"))
        assert (ack.status, ack.correlation_id) == ("accepted", f"{label}-{index}")
