"""The SQLite writer thread gives way to the event loop's thread on a shared CPU (issue 34;
``executor serve --writer-priority idle``, off by default: it cost one connection flat out up to a
third of its rows/s unpinned, docs/performance/notebook/ 2026-12-06).

On Linux the kernel's fair scheduler lets a running thread keep its CPU for up to a tick (4 ms at
``HZ=250``) when another thread of the same weight wakes on it: measured in the reference burst,
the event loop sat runnable for 1-5 ms behind this process's own writer thread, with frames
waiting, while the writer ran SQLite's part of a batch (docs/performance/notebook/ 2026-12-06).
A thread under ``SCHED_IDLE`` is preempted at once by any ordinary thread that wakes on its CPU,
and runs whenever nothing else wants that CPU, so the writer keeps its throughput wherever there
is an idle CPU.

It does not when its only CPU is the loop's too (a ``taskset`` of one CPU, a one-CPU cgroup): a
loop busy flat out would leave it no time at all, rows would queue and be dropped. So
:func:`give_way` lowers the calling thread only when it may run on more than one CPU (with
``executor serve --cpu`` the writer is already off the loop's CPUs, and there it gives way to the
poller and the rest instead).

Raising a thread back from ``SCHED_IDLE`` needs ``CAP_SYS_NICE`` or an ``RLIMIT_NICE`` of 20;
without either, :func:`restore` leaves it there and says so once (the thread returns to Trio's
thread cache at shutdown, where it may run the drain at idle priority).

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import os
from typing import Final, Literal, get_args

import structlog

WriterPriority = Literal["idle", "normal"]
"""``idle``: the writer thread gives way (:func:`give_way`); ``normal``: it is left alone."""

WRITER_PRIORITIES: Final[tuple[WriterPriority, ...]] = get_args(WriterPriority)

logger = structlog.get_logger()


def give_way() -> bool:
    """Put the calling thread under ``SCHED_IDLE`` when it may run on more than one CPU; True
    when it did. Where the policy does not exist or is refused, it logs why and returns False."""
    if not hasattr(os, "SCHED_IDLE"):
        logger.info("writer thread priority unchanged", reason="no SCHED_IDLE on this platform")
        return False
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        logger.info("writer thread priority unchanged", reason="it has one CPU", cpus=cpus)
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except OSError as error:
        logger.warning("writer thread priority unchanged", reason=str(error))
        return False
    return True


def restore() -> None:
    """Put the calling thread back under the ordinary policy (``SCHED_OTHER``), or log once why
    it stays where it is."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError as error:
        logger.info("writer thread stays at idle priority", reason=str(error))


__all__ = ["WRITER_PRIORITIES", "WriterPriority", "give_way", "restore"]
