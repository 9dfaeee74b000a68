"""The SQLite writer thread gives way to the event loop's thread on a shared CPU by the kernel's
priorities (issue 34; ``executor serve --writer-priority low|idle``, both opt-in: each cost one
connection flat out more than 5% of its rows/s unpinned, ``low`` 0.93-0.94x, and neither acts
where the whole process has one CPU; docs/performance/notebook/ 2026-12-06). The default,
``yield``, changes no priority: the writer yields by itself (``executor.recording.writer_yield``).

On Linux the kernel's fair scheduler lets a running thread keep its CPU for up to a tick (4 ms at
``HZ=250``) when another thread of the same weight wakes on it: measured in the reference burst,
the event loop sat runnable for 1-5 ms behind this process's own writer thread, with frames
waiting, while the writer ran SQLite's part of a batch. Two ways out, both for the writer thread
alone: ``low`` gives it the nice value ``LOW_NICE`` (a smaller weight: the loop waking on its
CPU preempts it far sooner, and it keeps most of a CPU nothing else wants); ``idle`` puts it under
``SCHED_IDLE`` (preempted at once by any ordinary thread, runs only on a CPU nothing else wants).

Neither is applied when the thread's only CPU is the loop's too (a ``taskset`` of one CPU, a
one-CPU cgroup): a loop busy flat out would leave it too little time, and rows would queue and be
dropped. So :func:`give_way` lowers the calling thread only when it may run on more than one CPU
(with ``executor serve --cpu`` the writer is already off the loop's CPUs, and there it gives way
to the poller and the rest instead).

Raising a thread back (a lower nice value, or out of ``SCHED_IDLE``) needs ``CAP_SYS_NICE`` or a
large enough ``RLIMIT_NICE``; without either, :func:`restore` leaves it where it is and says so
once: the thread returns to Trio's thread cache at shutdown, where it may run the drain (and any
later worker-thread call it is given) at that priority.

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Final, Literal, get_args

import structlog

WriterPriority = Literal["yield", "low", "idle", "normal"]
"""``yield``: left alone here, the writer yields to the loop itself while its backlog is small
(``executor.recording.writer_yield``); ``low``: nice ``LOW_NICE``; ``idle``: ``SCHED_IDLE``
(:func:`give_way`); ``normal``: left alone."""

WRITER_PRIORITIES: Final[tuple[WriterPriority, ...]] = get_args(WriterPriority)

LOW_NICE: Final = 5
"""How far ``low`` raises the writer thread's nice value above the process's (at most 19): at 5,
a weight of 335 against the loop's 1024. 10 (weight 110) cost as much flat out and left about as
many pauses behind the writer (0 against 1 in 12 unpinned bursts; docs/performance/notebook/
2026-12-06, second pass)."""

logger = structlog.get_logger()


def give_way(priority: WriterPriority = "idle") -> bool:
    """Lower the calling thread (``priority``: ``low`` or ``idle``) when it may run on more than
    one CPU; True when it did. Where it cannot be done or is refused, log why and return False."""
    if priority in ("normal", "yield"):
        return False
    if priority == "idle" and not hasattr(os, "SCHED_IDLE"):
        return _unchanged("no SCHED_IDLE on this platform")
    if priority == "low" and sys.platform != "linux":
        return _unchanged("a thread's own nice value is Linux's")  # elsewhere: the process's
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        return _unchanged("it has one CPU", cpus=cpus)
    try:
        if priority == "idle":
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        else:
            _set_nice(min(_process_nice() + LOW_NICE, 19))
    except OSError as error:
        logger.warning("writer thread priority unchanged", reason=str(error))
        return False
    return True


def restore(priority: WriterPriority = "idle") -> None:
    """Put the calling thread back (the ordinary policy; the process's nice value), or log once
    why it stays."""
    try:
        if priority == "idle":
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        else:
            _set_nice(_process_nice())
    except OSError as error:
        logger.info("writer thread stays at lowered priority", priority=priority, reason=str(error))


def _process_nice() -> int:
    # On Linux a process id names its main thread here: the nice value it started with.
    return os.getpriority(os.PRIO_PROCESS, os.getpid())


def _set_nice(value: int) -> None:
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), value)  # this thread only


def _unchanged(reason: str, **fields: int) -> bool:
    logger.info("writer thread priority unchanged", reason=reason, **fields)
    return False


__all__ = ["LOW_NICE", "WRITER_PRIORITIES", "WriterPriority", "give_way", "restore"]
