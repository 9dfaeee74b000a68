"""Exclusive ``flock`` locks on files, for the locks that keep one executor per socket and per
telemetry database (``executor.wire.unixsocket``, ``executor.recording.database_lock``).

The kernel drops an ``flock`` when its holder dies, even by SIGKILL, so a crash never blocks the
next start. A lock file that a refused start removes is only safe with :func:`still_at_path`: a
process that opened the old file just before it was unlinked must notice, once it holds the lock,
that the path now names another file, and start over on that one.

Cancellation: nothing here awaits (each call is one non-blocking system call or two).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Final

LOCK_ATTEMPTS: Final = 10
"""Times a lock's ``acquire`` starts over when the file it locked was unlinked meanwhile (a refused
start removing the lock file it created). Each round is three system calls; ten rounds can only be
lost to a path replaced on purpose, over and over."""


def lock_exclusively(fd: int) -> bool:
    """Take an exclusive, non-blocking ``flock`` on ``fd``; False when another holds one.

    Raises:
        OSError: the lock cannot be taken for another reason (the file system refuses locks).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def still_at_path(fd: int, path: Path) -> bool:
    """Whether the file open as ``fd`` is the one at ``path`` now (not unlinked or replaced)."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


__all__ = ["LOCK_ATTEMPTS", "lock_exclusively", "still_at_path"]
