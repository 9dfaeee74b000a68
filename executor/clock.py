"""Clocks: the process's clock domain and the monotonic stamp used for every duration."""

from __future__ import annotations

import functools
import socket
import time
from typing import Final

BOOT_QUANTUM_S: Final = 60
"""Boot-time estimates are rounded down to this many seconds, so two processes on one boot agree
although wall clock minus monotonic clock jitters by milliseconds between readings."""

stamp_ns = time.perf_counter_ns
"""The monotonic stamp for durations and ``recv_ns``/``sent_at_ns`` (the poller's clock too)."""


def wall_ms() -> int:
    """Wall-clock milliseconds since the epoch (``received_at_ms``, ``started_at_ms``)."""
    return time.time_ns() // 1_000_000


def estimated_boot_s() -> int:
    """Estimated boot time in epoch seconds, quantised to ``BOOT_QUANTUM_S``."""
    return int((time.time() - time.monotonic()) // BOOT_QUANTUM_S) * BOOT_QUANTUM_S


@functools.cache
def clock_domain() -> str:
    """``"<hostname>:<boot>"``: processes with equal domains share one perf-counter clock.

    Computed once per process (the first call), as PROTOCOL.md asks.
    """
    return f"{socket.gethostname()}:{estimated_boot_s()}"
