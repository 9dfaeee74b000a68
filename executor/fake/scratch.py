"""The fake exchange's throwaway folders: private, removed at exit, and never orphaned for long.

A fake exchange run without a folder of its own (``executor serve --exchange fake``, ``python -m
executor.fake`` without ``--dir``) writes a throwaway API key, its CA and its server key into a
fresh 0700 folder under the temporary directory, and removes it when it ends. A SIGKILL ends it
without that: so each folder holds a lock file its process keeps an exclusive ``flock`` on for its
whole life (the kernel drops it when the process dies, however it dies), and every such start
first removes the folders of processes that are gone: this user's, named as these are, whose lock
nobody holds.

Blocking file system calls: run them off the event loop, or before it starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

IN_PROCESS_PREFIX: Final = "executor-fake-"
"""The in-process fake's folders (``executor serve --exchange fake``)."""

COMMAND_PREFIX: Final = "fake-exchange-"
"""``python -m executor.fake``'s folders, without ``--dir``."""

SCRATCH_PREFIXES: Final = (IN_PROCESS_PREFIX, COMMAND_PREFIX)
"""Every name a throwaway folder starts with: a start cleans up after either kind."""

LOCK_NAME: Final = ".alive"
"""The lock file inside each folder; locked while the folder's process lives."""

STALE_AFTER_S: Final = 5.0
"""A folder younger than this (seconds since it last changed) is never removed, locked or not:
its process may be between creating the folder and locking it (two system calls apart). Far
longer than that on any machine; a guess."""


def remove_stale_folders(directory: Path | None = None) -> list[Path]:
    """Remove the throwaway folders whose process is gone; return what was removed.

    A folder counts when it is this user's, its name has one of ``SCRATCH_PREFIXES``, it has not
    changed for ``STALE_AFTER_S``, and its lock file is absent or not locked by anyone. Anything
    that cannot be inspected or removed is left alone.
    """
    parent = Path(tempfile.gettempdir()) if directory is None else directory
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(SCRATCH_PREFIXES):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.geteuid():
            continue
        if now - info.st_mtime < STALE_AFTER_S or _is_held(Path(entry.path) / LOCK_NAME):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    return removed


def _is_held(lock_file: Path) -> bool:
    """Whether a live process holds ``lock_file``'s ``flock`` (an absent file is not held)."""
    try:
        fd = os.open(lock_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: keep it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


@contextlib.contextmanager
def scratch_folder(prefix: str, *, directory: Path | None = None) -> Iterator[Path]:
    """A fresh 0700 folder named ``prefix...``, locked while the block runs, removed after it.

    Stale folders (:func:`remove_stale_folders`) are removed first.

    Raises:
        OSError: the folder or its lock file cannot be made.
    """
    remove_stale_folders(directory)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # still locked: nobody else removes it first
        os.close(fd)


__all__ = [
    "COMMAND_PREFIX",
    "IN_PROCESS_PREFIX",
    "LOCK_NAME",
    "SCRATCH_PREFIXES",
    "STALE_AFTER_S",
    "remove_stale_folders",
    "scratch_folder",
]
