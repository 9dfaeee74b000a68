"""The executor's Unix socket: single-instance lock, stale-socket cleanup, a bind with no window.

Trio has no released Unix-socket listener, so the socket is made by hand and wrapped in
``trio.SocketListener``. Anything that can connect to this socket can make the executor place
orders, so it must never exist with wider permissions than asked (0600 unless
``executor.wire.socket_access`` says otherwise), not even for a moment.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import tempfile
from pathlib import Path
from typing import Final

import trio

from executor.runtime.file_lock import LOCK_ATTEMPTS, lock_exclusively, still_at_path
from executor.wire.socket_access import OWNER_ONLY, SocketAccess

MAX_SOCKET_PATH_BYTES: Final = 107
"""Linux's ``sun_path`` holds 108 bytes including the terminating NUL."""

LISTEN_BACKLOG: Final = 1024
"""Pending connections the kernel queues (the kernel caps it at somaxconn). The poller opens one
or two; a burst of hundreds of connects (tests, a restart storm) must not meet EAGAIN. A guess."""

LOCK_FILE_MODE: Final = 0o600
"""Owner read/write only: only executors take the lock, whoever may connect to the socket."""


class SocketSetupError(Exception):
    """The socket path cannot be used; the message is one line naming the path and the problem."""


class SocketPathError(SocketSetupError):
    """The ``--socket`` text itself cannot name a socket (a directory name, too long): a usage
    error, which the command line reports with exit status 2 rather than 1."""


def lock_path_for(socket_path: Path) -> Path:
    """The lock file that guards ``socket_path``: ``PATH.lock`` beside it."""
    return socket_path.with_name(socket_path.name + ".lock")


def check_socket_path(socket_path: Path) -> None:
    """Refuse a path that cannot name a socket file: empty, a directory name, or too long."""
    text = os.fspath(socket_path)
    if text in ("", ".", "..") or text.endswith("/") or socket_path.name in ("", ".", ".."):
        shown = repr(text) if text in ("", ".", "..") else text
        raise SocketPathError(
            f"socket path {shown} names a directory, not a socket file (e.g. DIR/executor.sock)"
        )
    size = len(os.fsencode(socket_path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(
            f"socket path {socket_path} is {size} bytes; AF_UNIX allows {MAX_SOCKET_PATH_BYTES}"
        )


def check_socket_apart(socket_path: Path, telemetry_db: Path) -> None:
    """Refuse a socket path that is the database's own path or one of its folders (``--socket D
    --telemetry-db D/t.db``): one of the two could never be made, and the database would be
    created before the socket found out."""
    socket_abs = Path(os.path.abspath(socket_path))
    database_abs = Path(os.path.abspath(telemetry_db))
    if socket_abs == database_abs:
        raise SocketPathError(
            f"socket path {socket_path} is also the telemetry database: give each its own path"
        )
    if socket_abs in database_abs.parents:
        raise SocketPathError(
            f"socket path {socket_path} is the folder of the telemetry database {telemetry_db}: "
            f"a path cannot be both (e.g. --socket {socket_path}/executor.sock)"
        )


def _describe(error: OSError) -> str:
    """An OSError's words (Python raises some, e.g. "AF_UNIX path too long", without strerror)."""
    return error.strerror or str(error)


def _parent_problem(path: Path) -> str | None:
    """Why ``path``'s parent cannot hold new files, in words, when it plainly cannot."""
    for ancestor in path.parents:
        try:
            mode = os.stat(ancestor).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            return None
        if not stat.S_ISDIR(mode):
            return f"{ancestor} is not a directory"
        if ancestor.resolve().is_relative_to("/proc") or ancestor.resolve().is_relative_to("/sys"):
            return f"{ancestor} is on a kernel file system where no socket can be created"
        return None
    return None


class InstanceLock:
    """An exclusive, non-blocking ``flock`` on ``PATH.lock``, held for the life of the process.

    The kernel drops the lock when the holder dies, even by SIGKILL, so a crashed executor never
    blocks its successor. On a normal exit the lock file is left in place; a start-up that fails
    after taking the lock removes the file if it created it (``release(remove_created=True)``),
    so a refused start leaves the directory as it found it.

    Removing a lock file is only safe because :meth:`acquire` checks, once it holds the ``flock``,
    that the file it locked is still the one at the path: a process that opened the old file
    just before it was unlinked finds it gone and starts over on the new one, so two processes
    can never each hold a lock on a different inode of the same path.
    """

    def __init__(self, socket_path: Path) -> None:
        self.path = lock_path_for(socket_path)
        self._socket_path = socket_path
        self._fd: int | None = None
        self.created = False
        """Whether this process created the lock file (it did not exist before ``acquire``)."""
        self._created_dirs: list[Path] = []
        """Folders ``acquire`` made for the socket, deepest first."""

    def acquire(self) -> None:
        """Take the lock or raise ``SocketSetupError`` saying another executor holds it."""
        problem = _parent_problem(self.path)
        if problem is not None:
            raise SocketSetupError(f"cannot use socket path {self._socket_path}: {problem}")
        for _ in range(LOCK_ATTEMPTS):
            fd, created = self._open()
            self._lock(fd)
            if still_at_path(fd, self.path):
                self._fd, self.created = fd, created
                return
            os.close(fd)  # unlinked by a failed start between our open and our flock
        raise SocketSetupError(f"cannot lock {self.path}: it keeps being replaced")

    def _open(self) -> tuple[int, bool]:
        """(descriptor, whether this call created the file)."""
        flags = os.O_RDWR | os.O_CLOEXEC
        try:
            missing = [folder for folder in self.path.parents if not folder.exists()]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._created_dirs = self._created_dirs or missing
            for _ in range(LOCK_ATTEMPTS):
                try:
                    return os.open(self.path, flags | os.O_CREAT | os.O_EXCL, LOCK_FILE_MODE), True
                except FileExistsError:
                    pass
                with contextlib.suppress(FileNotFoundError):  # removed meanwhile: create it
                    return os.open(self.path, flags), False
        except OSError as error:
            raise SocketSetupError(
                f"cannot open lock file {self.path}: {_describe(error)}"
            ) from None
        raise SocketSetupError(f"cannot open lock file {self.path}: it keeps being replaced")

    def _lock(self, fd: int) -> None:
        try:
            locked = lock_exclusively(fd)
        except OSError as error:
            os.close(fd)
            raise SocketSetupError(f"cannot lock {self.path}: {error.strerror}") from None
        if not locked:
            os.close(fd)
            raise SocketSetupError(
                f"another executor is running on this socket (lock {self.path} is held)"
            )

    def release(self, *, remove_created: bool = False) -> None:
        """Drop the lock (closing the descriptor releases the ``flock``); with
        ``remove_created``, first unlink the lock file if this process created it, and then the
        folders it made for it, if they are empty."""
        if self._fd is None:
            return
        if remove_created and self.created:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still holding the flock: nobody else holds this inode
        os.close(self._fd)
        self._fd = None
        if remove_created and self.created:
            for folder in self._created_dirs:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only if empty: never anything another process put there


def remove_stale_socket(socket_path: Path) -> None:
    """Remove a crashed executor's socket; refuse to remove anything that is not a socket.

    Only call this with the instance lock held: then nobody else can be serving on it.
    """
    try:
        mode = os.lstat(socket_path).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise SocketSetupError(f"cannot inspect {socket_path}: {error.strerror}") from None
    if not stat.S_ISSOCK(mode):
        if stat.S_ISDIR(mode):
            kind = "directory"
        elif stat.S_ISLNK(mode):
            kind = "symbolic link"
        else:
            kind = "file that is not a socket"
        raise SocketSetupError(f"{socket_path} exists and is a {kind}; refusing to remove it")
    try:
        os.unlink(socket_path)
    except OSError as error:
        # E.g. a sticky /tmp where someone else's socket sits: not ours to remove.
        raise SocketSetupError(
            f"cannot remove the stale socket {socket_path}: {_describe(error)}"
        ) from None


_STAGING_NAME: Final = "s"
"""The socket's name inside its private bind directory."""


class PreparedSocket:
    """A listening Unix socket with its final group and mode, not yet reachable at its path.

    It sits in a fresh 0700 directory beside the final path, where it is given its group and
    mode before it listens; :meth:`publish` renames it into place. Splitting the two lets
    start-up claim the socket (every bind failure happens here) before it opens the database,
    and publish only once everything that serves it is running.
    """

    def __init__(self, socket_path: Path, access: SocketAccess = OWNER_ONLY) -> None:
        self.socket_path = socket_path
        self.access = access
        self._private_dir = Path(tempfile.mkdtemp(prefix=".bind-", dir=socket_path.parent))
        self._dir_fd = -1
        self._sock: socket.socket | None = None
        try:
            self._dir_fd = os.open(self._private_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            staging = self._private_dir / _STAGING_NAME
            if len(os.fsencode(staging)) > MAX_SOCKET_PATH_BYTES:
                # The private directory adds ~17 bytes; reach it through its descriptor instead,
                # so every final path up to the kernel's limit binds.
                staging = Path(f"/proc/self/fd/{self._dir_fd}") / _STAGING_NAME
            self._sock.bind(os.fspath(staging))
            if access.group_id is not None:
                self._give_to_group(access)
            os.chmod(_STAGING_NAME, access.mode, dir_fd=self._dir_fd)
            self._sock.listen(LISTEN_BACKLOG)
        except BaseException:
            self.discard()
            raise

    def _give_to_group(self, access: SocketAccess) -> None:
        """Hand the staged socket to the group (before its mode opens anything to a group)."""
        assert access.group_id is not None
        try:
            os.chown(_STAGING_NAME, -1, access.group_id, dir_fd=self._dir_fd)
        except OSError as error:
            raise SocketSetupError(
                f"cannot give {self.socket_path} to group {access.group_name}: {_describe(error)}"
            ) from None

    def publish(self) -> trio.SocketListener:
        """Rename the socket to its final path (reachable from now on) and wrap it for Trio."""
        return trio.SocketListener(trio.socket.from_stdlib_socket(self.publish_socket()))

    def publish_socket(self) -> socket.socket:
        """Rename the socket to its final path (reachable from now on) and hand it over as is."""
        assert self._sock is not None
        os.rename(_STAGING_NAME, self.socket_path, src_dir_fd=self._dir_fd)
        sock, self._sock = self._sock, None
        self._remove_private_dir()
        return sock

    def discard(self) -> None:
        """Close the socket and remove the private directory (publish never happened)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._remove_private_dir()

    def _remove_private_dir(self) -> None:
        if self._dir_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(_STAGING_NAME, dir_fd=self._dir_fd)
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = -1
        with contextlib.suppress(OSError):
            self._private_dir.rmdir()


def prepare_unix_socket(socket_path: Path, access: SocketAccess = OWNER_ONLY) -> PreparedSocket:
    """Bind and listen at a private name with ``access``'s group and mode (default owner-only,
    0600); ``publish()`` makes it reachable.

    The caller holds the instance lock and has removed any stale socket. Everything here is a
    local system call that does not block.

    Raises:
        SocketSetupError: the socket cannot be made (the message names the path and the problem).
    """
    check_socket_path(socket_path)
    try:
        return PreparedSocket(socket_path, access)
    except OSError as error:
        raise SocketSetupError(f"cannot bind {socket_path}: {_describe(error)}") from None


def publish_unix_socket(prepared: PreparedSocket) -> trio.SocketListener:
    """Make ``prepared`` reachable at its path; on failure it is discarded.

    Raises:
        SocketSetupError: the rename into place failed.
    """
    try:
        return prepared.publish()
    except OSError as error:
        prepared.discard()
        raise SocketSetupError(f"cannot bind {prepared.socket_path}: {_describe(error)}") from None


def bind_unix_listener(socket_path: Path, access: SocketAccess = OWNER_ONLY) -> trio.SocketListener:
    """Bind, give the socket ``access``'s group and mode, listen, and only then make it reachable
    at its path.

    The socket is bound inside a fresh 0700 directory next to ``socket_path``, chowned and
    chmodded, set listening, and renamed into place, so no process can reach it while its
    permissions differ from the ones asked for.
    """
    return publish_unix_socket(prepare_unix_socket(socket_path, access))


def remove_socket_file(socket_path: Path) -> None:
    """Remove our socket file on exit, if it is still a socket (never anything else)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            os.unlink(socket_path)
