"""The kill switch file: a file whose presence halts real fires, read with a short cache.

The decision layer reads only a view of it (``executor.decide.decision.KillSwitchState``: why it
is engaged, or None); this module is the file behind that view, and the command that manages it
is ``executor killswitch`` (``executor.trading.kill_command``).

The switch is engaged while anything exists at its path; an empty file engages it. The file's
stripped text, when it is a readable regular file with non-empty text, is the reason logged with
every refused fire; otherwise the reason is ``NO_REASON``.

Fail-safe rule: a path that exists but cannot be read as a regular file (permission denied, a
directory, a FIFO, a socket, a device) counts as **engaged**, with a reason that says why it could
not be read (``unreadable_reason``: ``(switch file unreadable: it is a directory)``); so does any
error other than "nothing is there" while looking (for instance a parent directory the executor
may not search). A switch that cannot be checked stops real fires rather than letting them
through. Only "no such file" (``ENOENT``, or ``ENOTDIR`` when a parent is a regular file) means
released.

The executor reads the switch at most once per ``ttl_s`` (a plain ``open``/``fstat``/``read`` of a
small local file, a few microseconds), so a fire does not touch the file system every time, and an
operator's change is seen within ``ttl_s``.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

DEFAULT_TTL_S: Final = 1.0
"""How long (seconds) a reading of the switch is trusted: an operator's halt lands within a second,
and a busy executor reads the file at most once a second. A judgement call, not a measurement."""

NO_REASON: Final = "(no reason recorded)"
"""The reason reported when the switch file is empty (or holds only whitespace)."""

_FILE_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def unreadable_reason(why: str) -> str:
    """The reason of a switch that is engaged because its file cannot be read, saying why."""
    return f"(switch file unreadable: {why})"


MAX_REASON_BYTES: Final = 4096
"""Most bytes read from the switch file: a reason is a log line, and a fire must not read a
large file by mistake."""

SWITCH_FILE_MODE: Final = 0o644
"""Mode of a file written by ``engage``: readable by an executor running as another user."""

_RELEASED_ERRNOS: Final = frozenset({errno.ENOENT, errno.ENOTDIR})


class KillSwitch:
    """A kill switch file, read with a short cache.

    Args:
        path: the switch file. Its parent directory is created by ``engage`` if missing.
        ttl_s: how long a reading is reused; 0 reads the file on every call.
        clock: monotonic seconds, injectable for tests.
    """

    def __init__(
        self,
        path: os.PathLike[str] | str,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not ttl_s >= 0:  # also refuses NaN
            raise ValueError(f"ttl_s must be >= 0, got {ttl_s!r}")
        self.path = Path(path)
        self._ttl_s = ttl_s
        self._clock = clock
        self._read_at: float | None = None
        self._cached_reason: str | None = None

    @property
    def ttl_s(self) -> float:
        """Seconds a reading is reused."""
        return self._ttl_s

    def engaged_reason(self) -> str | None:
        """The reason the switch is engaged, or None when it is released.

        Reads the file at most once per ``ttl_s``; a change made in between is seen once the
        reading expires (at once with ``ttl_s == 0``, or after this object's own ``engage`` or
        ``release``).
        """
        now = self._clock()
        if self._ttl_s > 0 and self._read_at is not None and now - self._read_at < self._ttl_s:
            return self._cached_reason
        self._cached_reason = self._read()
        self._read_at = now
        return self._cached_reason

    def engage(self, reason: str = "") -> None:
        """Engage the switch with ``reason``, replacing any earlier reason.

        The file appears whole or not at all: the text goes to a temporary file beside it, which
        is renamed over the path. The parent directory is created if missing.

        Raises:
            OSError: the file could not be written (the switch is left as it was).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            # mkstemp makes the file 0600; the reason is no secret, and an executor running as
            # another user should read it rather than fall back to NO_REASON.
            os.fchmod(descriptor, SWITCH_FILE_MODE)
            with os.fdopen(descriptor, "wb") as file:
                file.write(reason.encode("utf-8", errors="replace"))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self._forget()

    def release(self) -> bool:
        """Release the switch by removing the file; return whether it was engaged.

        Raises:
            OSError: something is at the path but could not be removed (a directory, say).
        """
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        finally:
            self._forget()
        return True

    def _forget(self) -> None:
        self._read_at = None
        self._cached_reason = None

    def _read(self) -> str | None:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
        try:
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            if error.errno in _RELEASED_ERRNOS:
                return None
            return unreadable_reason(_strerror(error))
        try:
            mode = os.fstat(descriptor).st_mode
            if not stat.S_ISREG(mode):
                kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a file")
                return unreadable_reason(f"it is {kind}")
            raw = os.read(descriptor, MAX_REASON_BYTES)
        except OSError as error:
            return unreadable_reason(_strerror(error))
        finally:
            os.close(descriptor)
        reason = raw.decode("utf-8", errors="replace").strip()
        return reason or NO_REASON


def _strerror(error: OSError) -> str:
    return error.strerror or str(error)


__all__ = [
    "DEFAULT_TTL_S",
    "MAX_REASON_BYTES",
    "NO_REASON",
    "SWITCH_FILE_MODE",
    "KillSwitch",
    "unreadable_reason",
]
