"""The executor's Unix socket: single-instance lock, stale-socket cleanup, owner-only bind.

Trio has no released Unix-socket listener, so the socket is made by hand and wrapped in
``trio.SocketListener``. Anything that can connect to this socket can make the executor place
orders, so it must never exist with wider permissions than 0600, not even for a moment.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import tempfile
from pathlib import Path
from typing import Final

import trio

MAX_SOCKET_PATH_BYTES: Final = 107
"""Linux's ``sun_path`` holds 108 bytes including the terminating NUL."""

LISTEN_BACKLOG: Final = 1024
"""Pending connections the kernel queues (the kernel caps it at somaxconn). The poller opens one
or two; a burst of hundreds of connects (tests, a restart storm) must not meet EAGAIN. A guess."""

SOCKET_MODE: Final = 0o600
"""Owner read/write only."""


class SocketSetupError(Exception):
    """The socket path cannot be used; the message is one line naming the path and the problem."""


def lock_path_for(socket_path: Path) -> Path:
    """The lock file that guards ``socket_path``: ``PATH.lock`` beside it."""
    return socket_path.with_name(socket_path.name + ".lock")


def check_socket_path(socket_path: Path) -> None:
    """Refuse a path the kernel cannot bind (too long for ``sun_path``)."""
    size = len(os.fsencode(socket_path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise SocketSetupError(
            f"socket path {socket_path} is {size} bytes; AF_UNIX allows {MAX_SOCKET_PATH_BYTES}"
        )


class InstanceLock:
    """An exclusive, non-blocking ``flock`` on ``PATH.lock``, held for the life of the process.

    The kernel drops the lock when the holder dies, even by SIGKILL, so a crashed executor never
    blocks its successor. The lock file itself is left in place: removing it would let a third
    process lock a fresh inode while a second still holds the old one.
    """

    def __init__(self, socket_path: Path) -> None:
        self.path = lock_path_for(socket_path)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``SocketSetupError`` saying another executor holds it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, SOCKET_MODE)
        except OSError as error:
            raise SocketSetupError(f"cannot open lock file {self.path}: {error.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise SocketSetupError(
                    f"another executor is running on this socket (lock {self.path} is held)"
                ) from None
            raise SocketSetupError(f"cannot lock {self.path}: {error.strerror}") from None
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the ``flock``)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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
        kind = "directory" if stat.S_ISDIR(mode) else "file that is not a socket"
        raise SocketSetupError(f"{socket_path} exists and is a {kind}; refusing to remove it")
    os.unlink(socket_path)


def bind_unix_listener(socket_path: Path) -> trio.SocketListener:
    """Bind, restrict to 0600, listen, and only then make the socket reachable at its path.

    The socket is bound inside a fresh 0700 directory next to ``socket_path``, chmodded, set
    listening, and renamed into place, so no process can reach it while its mode is wider. The
    caller holds the instance lock and has removed any stale socket. Everything here is a local
    system call that does not block.
    """
    check_socket_path(socket_path)
    private_dir = Path(tempfile.mkdtemp(prefix=".bind-", dir=socket_path.parent))
    staging = private_dir / "s"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(os.fspath(staging))
        os.chmod(staging, SOCKET_MODE)
        sock.listen(LISTEN_BACKLOG)
        os.rename(staging, socket_path)
    except OSError as error:
        sock.close()
        raise SocketSetupError(f"cannot bind {socket_path}: {error.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            staging.unlink()
        with contextlib.suppress(OSError):
            private_dir.rmdir()
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


def remove_socket_file(socket_path: Path) -> None:
    """Remove our socket file on exit, if it is still a socket (never anything else)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            os.unlink(socket_path)
