"""CPU placement: the event-loop thread on the CPUs given, every other thread and process off them.

``executor serve --cpu N`` (or a list, ``--cpu 0,1``, or a range, ``--cpu 0-1``). Linux affinity
is per thread and inherited: a thread or process starts with the mask of the thread that started
it. So :func:`apply_placement`, called on the thread that is about to run ``trio.run`` (the loop
thread), does three things:

1. every thread already running moves off the loop's CPUs (``/proc/self/task``);
2. every thread started later through :mod:`threading` (Trio's worker threads, so the telemetry
   writer; the log writer; the metrics endpoint's threads) moves itself off them as it starts:
   a one-shot ``threading.setprofile`` hook that sets the new thread's own affinity on its first
   event and removes itself, so the thread pays for it once and runs unprofiled after;
3. the calling thread pins itself to the loop's CPUs (``os.sched_setaffinity(0, ...)``, which on
   Linux is the calling thread alone).

Worker processes inherit from the thread that starts them: trio-parallel starts its signing workers
from a Trio worker thread, which is already off the loop's CPUs, so they are too.

On a machine (or a cgroup, or a ``taskset``) that allows only the loop's CPUs, there is nowhere
else to go: the other threads keep every allowed CPU and :attr:`Placement.shared` says so.

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Final

import structlog

TASKS_DIR: Final = "/proc/self/task"
"""Where Linux lists this process's threads, one directory per thread id."""

logger = structlog.get_logger()


class PlacementError(ValueError):
    """A ``--cpu`` value this process cannot use (the message says why, in one line)."""


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on now (its affinity, which a cgroup or taskset narrows)."""
    return frozenset(os.sched_getaffinity(0))


def _describe(cpus: frozenset[int]) -> str:
    return ",".join(str(cpu) for cpu in sorted(cpus))


_CPU_ITEM: Final = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
"""One item of a CPU list: ``N``, ``N-M`` or ``N-M:STRIDE`` (``taskset -c``'s forms)."""


def parse_cpus(text: str, allowed: frozenset[int] | None = None) -> frozenset[int]:
    """The CPUs a ``--cpu`` value names, in the list forms ``taskset -c`` and systemd's
    ``CPUAffinity=`` take: items ``N``, ``N-M`` (both included) or ``N-M:STRIDE``, separated by
    commas or spaces (``1``, ``0,1``, ``0-1``, ``0-3:2``, ``0-1 3``).

    Raises:
        PlacementError: empty, an item of another form (a range that runs backwards, a zero
            stride), or a CPU outside ``allowed`` (default: this process's affinity).
    """
    allowed = allowed_cpus() if allowed is None else allowed
    cpus: set[int] = set()
    items = re.split(r"\s*,\s*|\s+", text.strip())
    for item in items:
        match = _CPU_ITEM.fullmatch(item)
        first = int(match.group(1)) if match else 0
        last = int(match.group(2)) if match and match.group(2) else first
        stride = int(match.group(3)) if match and match.group(3) else 1
        if match is None or last < first or stride < 1:
            raise PlacementError(
                "expected a CPU number, a range or a list of them (e.g. 1, 0,1 or 0-1), "
                f"got {text!r}"
            )
        cpus.update(range(first, last + 1, stride))
    missing = frozenset(cpus) - allowed
    if missing:
        raise PlacementError(
            f"CPU {_describe(missing)} is not available to this process"
            f" (allowed: {_describe(allowed)})"
        )
    return frozenset(cpus)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the loop thread runs and where everything else runs."""

    loop_cpus: frozenset[int]
    other_cpus: frozenset[int]
    """The allowed CPUs minus the loop's; every allowed CPU when that leaves none."""

    @classmethod
    def for_loop(cls, loop_cpus: frozenset[int], allowed: frozenset[int]) -> Placement:
        """The placement that gives the loop ``loop_cpus`` and the rest what is left."""
        return cls(loop_cpus, (allowed - loop_cpus) or allowed)

    @property
    def shared(self) -> bool:
        """True when the other threads could not be kept off the loop's CPUs."""
        return bool(self.loop_cpus & self.other_cpus)

    def describe(self) -> dict[str, str | bool]:
        """The placement as log fields."""
        return {
            "loop_cpus": _describe(self.loop_cpus),
            "other_cpus": _describe(self.other_cpus),
            "shared": self.shared,
        }


def _move_off(tid: int, cpus: frozenset[int]) -> bool:
    """Set thread ``tid``'s affinity (0: the calling thread); False if it is gone or refused."""
    try:
        os.sched_setaffinity(tid, cpus)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    return True


def _leave_hook(cpus: frozenset[int]) -> Callable[[FrameType, str, object], None]:
    """A one-shot profile function: the thread it first runs in moves itself to ``cpus``."""

    def leave(_frame: FrameType, _event: str, _arg: object) -> None:
        sys.setprofile(None)
        if not _move_off(0, cpus):
            logger.warning("thread could not leave the event loop's CPUs", cpus=_describe(cpus))

    return leave


def other_thread_ids() -> list[int]:
    """The ids of this process's threads other than the calling one (Linux)."""
    me = threading.get_native_id()
    return [int(name) for name in os.listdir(TASKS_DIR) if int(name) != me]


def apply_placement(placement: Placement) -> None:
    """Pin the calling thread to the loop's CPUs and keep every other thread off them.

    Call it on the thread that will run ``trio.run``, before starting other threads where
    possible (threads already running are moved too). Blocking (reads ``/proc``): start-up only.

    Raises:
        PlacementError: the calling thread could not be pinned.
    """
    if not placement.shared:
        threading.setprofile(_leave_hook(placement.other_cpus))
        for tid in other_thread_ids():
            _move_off(tid, placement.other_cpus)
    try:
        os.sched_setaffinity(0, placement.loop_cpus)
    except OSError as error:
        raise PlacementError(
            f"cannot pin the event loop to CPU {_describe(placement.loop_cpus)}: {error}"
        ) from None
