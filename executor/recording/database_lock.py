"""One executor per telemetry file: an exclusive ``flock`` on the database file itself, and what
the file and its folder let this process write.

A second executor on the same ``--telemetry-db`` (another socket, so the socket's lock does not
stop it) would interleave its audit rows, heartbeats and start-up corrections with the first's.
So the executor that writes a file holds an exclusive, non-blocking ``flock`` on it for as long as
its connection is open; another is refused before it opens the file, and a crash releases the lock
(the kernel drops it, even on SIGKILL). Readers (``executor stats``, the reference poller) never
take it and never wait for it.

Why the database file and not a ``.lock`` beside it: it needs no extra file (a read-only folder
has room for none), and an ``flock`` is invisible to SQLite, whose own locks are POSIX record
locks on the same file (on Linux the two never interact, except on NFS, where SQLite's WAL mode
is not supported anyway). One rule follows from POSIX locks: closing *any* descriptor of the file
drops every POSIX lock the process holds on it, so the lock's descriptor is closed only after the
process's SQLite connections to the file are (``release`` after the writer's close).

Blocking file system calls, like everything the writer thread runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path
from typing import Final

import structlog

from executor.recording.database import (
    TelemetryOpenError,
    describe,
    open_database,
    open_read_only,
    path_problem,
    prove_writable,
)
from executor.runtime.file_lock import LOCK_ATTEMPTS, lock_exclusively, still_at_path

log = structlog.get_logger()

NEW_FILE_MODE: Final = 0o600
"""Mode of a database file this process creates: its owner's only (every order is in it). SQLite
gives the ``-wal`` and ``-shm`` it creates beside it the same mode."""

SHARED_FILE_MODE: Final = 0o660
"""Mode of a database file created for a group (``--socket-group``: a poller of another user in
that group reads it, and a WAL reader needs to write the ``-shm``)."""

NOT_WRITABLE: Final = (errno.EACCES, errno.EROFS, errno.EPERM)
"""The errors of a file or folder this process may read but not write: permissions, a read-only
mount, an immutable file."""


class DatabaseLock:
    """The exclusive ``flock`` on the telemetry file ``path``, and whether it can be written.

    Attributes:
        created: this process created the (empty) file; a refused start removes it.
        file_error: why the file itself can only be read (None when it can be written).
    """

    def __init__(self, path: Path, share_group: int | None = None) -> None:
        self.path = path
        self.share_group = share_group
        """The group a file this process creates is given to (with ``SHARED_FILE_MODE``);
        None keeps it the owner's alone."""
        self._fd: int | None = None
        self.created = False
        self.file_error: OSError | None = None

    def acquire(self) -> None:
        """Open (creating it if missing) and lock the file.

        Raises:
            TelemetryOpenError: another executor holds the lock, or the file cannot be opened or
                created (the message names the path and the error, ``EROFS``/``EACCES``).
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise self._open_error(error) from None
        for _ in range(LOCK_ATTEMPTS):
            fd = self._open()
            try:
                locked = lock_exclusively(fd)
            except OSError as error:
                os.close(fd)
                raise TelemetryOpenError(
                    f"cannot lock telemetry database {self.path}: {describe(error)}"
                ) from None
            if not locked:
                os.close(fd)
                raise TelemetryOpenError(
                    f"another executor is writing telemetry database {self.path} (it holds "
                    "the file's lock): give each executor its own --telemetry-db"
                )
            if still_at_path(fd, self.path):
                self._fd = fd
                return
            os.close(fd)  # unlinked by a refused start between our open and our flock
            self.created = False
        raise TelemetryOpenError(f"cannot lock {self.path}: it keeps being replaced")

    def _open(self) -> int:
        flags = os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags | os.O_RDWR | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE)
        except FileExistsError:
            pass
        except OSError as error:
            raise self._open_error(error) from None
        else:
            self.created = True
            try:
                self._set_access(fd)
            except OSError as error:
                os.close(fd)
                raise TelemetryOpenError(
                    f"cannot give telemetry database {self.path} to group {self.share_group}: "
                    f"{describe(error)}"
                ) from None
            return fd
        try:
            return os.open(self.path, flags | os.O_RDWR)
        except OSError as error:
            if error.errno not in NOT_WRITABLE:
                raise self._open_error(error) from None
            self.file_error = error
        try:
            return os.open(self.path, flags | os.O_RDONLY)
        except OSError as error:
            raise self._open_error(error) from None

    def _set_access(self, fd: int) -> None:
        """The new file's mode, exactly (``os.open``'s is masked by the umask) and group."""
        if self.share_group is None:
            os.fchmod(fd, NEW_FILE_MODE)
            return
        os.fchown(fd, -1, self.share_group)
        os.fchmod(fd, SHARED_FILE_MODE)

    def share_companions(self) -> None:
        """Give the ``-wal``/``-shm`` SQLite created beside the file to the share group (SQLite
        copies the file's mode to them, not its group, unless it runs as root). A failure is
        one warning: the executor writes on; a poller of the group may then fail to read."""
        if self.share_group is None:
            return
        for suffix in ("-wal", "-shm"):
            companion = self.path.with_name(self.path.name + suffix)
            try:
                if os.stat(companion).st_gid != self.share_group:
                    os.chown(companion, -1, self.share_group)
            except FileNotFoundError:
                continue
            except OSError as error:
                log.warning(
                    "cannot give a database file to the socket's group",
                    path=str(companion),
                    error=describe(error),
                )

    def _open_error(self, error: OSError) -> TelemetryOpenError:
        path = self.path
        if error.errno == errno.EISDIR:
            return TelemetryOpenError(f"telemetry database {path} is a directory")
        if error.errno in NOT_WRITABLE and not path.exists():
            return TelemetryOpenError(
                f"cannot create telemetry database {path}: {path.parent} is not writable "
                f"({describe(error)})"
            )
        problem = path_problem(path) or describe(error)
        return TelemetryOpenError(f"cannot open telemetry database {path}: {problem}")

    def write_error(self) -> OSError | None:
        """Why this process cannot write the database, or None: the file is read-only, or the
        folder cannot take the ``-wal``/``-shm`` files WAL mode needs and they are not there."""
        if self.file_error is not None:
            return self.file_error
        companions = [self.path.with_name(self.path.name + suffix) for suffix in ("-wal", "-shm")]
        if all(companion.exists() for companion in companions):
            return None
        return folder_write_error(self.path.parent)

    def release(self) -> None:
        """Drop the lock. Only once this process's SQLite connections to the file are closed."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def open_locked_database(
    lock: DatabaseLock, *, require_writable: bool
) -> tuple[sqlite3.Connection, bool]:
    """Open the database ``lock`` holds; return the connection and whether it was created.

    One this process cannot write is refused with ``require_writable`` (an executor with an
    exchange does not trade without its audit trail), else opened read-only; with
    ``require_writable`` one that opens is also proven writable by a committed write.

    Raises:
        TelemetryOpenError: it cannot be opened, or (``require_writable``) written; the message
            names the path and the error (``EROFS``, ``EACCES``).
    """
    path = lock.path
    unwritable = lock.write_error()
    if unwritable is not None:
        if require_writable:
            raise TelemetryOpenError(
                f"telemetry database {path} is not writable ({describe(unwritable)}): "
                "with an exchange the executor does not trade without its audit trail"
            )
        return open_read_only(path, unwritable), False
    connection, created = open_database(path)
    # A shared database's -wal and -shm must exist to be given to the group: SQLite creates
    # them at the first write, which the proof is.
    if require_writable or lock.share_group is not None:
        try:
            prove_writable(connection, path)
        except TelemetryOpenError:
            connection.close()
            raise
    lock.share_companions()
    return connection, created


def folder_write_error(folder: Path) -> OSError | None:
    """The error creating a file in ``folder`` gives, or None when it can be written.

    ``access`` says whether; only when it says no is a creation tried, to learn the errno (it then
    fails and changes nothing; if it succeeds after all, the file is removed at once).
    """
    if os.access(folder, os.W_OK):
        return None
    probe = folder / f".trio-executor-write-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as error:
        return error
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


__all__ = ["DatabaseLock", "TelemetryOpenError", "folder_write_error", "open_locked_database"]
