"""Whether the event loop's thread wants a CPU, read from the kernel without touching the loop.

The telemetry writer thread asks this between slices of its SQLite work
(``executor.recording.writer_yield``): a thread the kernel calls runnable (state ``R`` in
``/proc/self/task/<tid>/stat``) is running or waiting for a CPU, where one asleep in
``epoll_wait`` or on a lock is not. Reading it costs ~1.3 µs (one ``pread`` of an open file) and
no lock the loop takes: the loop's thread is never woken, held or asked anything.

Linux only: elsewhere (no ``/proc``) :meth:`LoopWatch.of_thread` returns None and the
writer never gives way.

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import os
from typing import Final

_STAT_READ_BYTES: Final = 512
"""Enough of a ``stat`` line to hold the state field: a pid, a command name of at most 64 bytes
(in parentheses) and the one-letter state come first."""


class LoopWatch:
    """The scheduler state of one thread of this process, by its native id."""

    def __init__(self, native_id: int) -> None:
        """Open the thread's ``stat`` file (``OSError`` where there is none)."""
        self.native_id = native_id
        self._fd: int | None = os.open(f"/proc/self/task/{native_id}/stat", os.O_RDONLY)

    @classmethod
    def of_thread(cls, native_id: int) -> LoopWatch | None:
        """A watch of the thread ``native_id`` (``threading.get_native_id()`` on it), or None
        where the kernel gives no per-thread state."""
        try:
            return cls(native_id)
        except OSError:
            return None

    def runnable(self) -> bool:
        """True when the thread is running or waiting for a CPU; False when it sleeps, or once
        it has ended or this watch is closed."""
        if self._fd is None:
            return False
        try:
            line = os.pread(self._fd, _STAT_READ_BYTES, 0)
        except OSError:  # the thread has ended
            return False
        # The command name may hold ") ": the state follows the last one.
        end = line.rfind(b")")
        return end >= 0 and line[end + 2 : end + 3] == b"R"

    def close(self) -> None:
        """Release the file; :meth:`runnable` is False from now on."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


__all__ = ["LoopWatch"]
