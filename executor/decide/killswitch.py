"""The kill switch: a file whose presence halts real fires, and the command that manages it.

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

import argparse
import errno
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, NoReturn, Protocol

from executor.runtime.exit_codes import EXIT_FAILURE, EXIT_OK

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

EXIT_ENGAGED: Final = 2
"""``status`` while the switch is engaged."""


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


class _UsageError(Exception):
    """Bad command-line usage; the message is the one line printed."""


class KillUsageError(Exception):
    """The exchange half of ``engage`` is misconfigured; the message is the one line printed."""


class ExchangeKill(Protocol):
    """The exchange half of ``engage`` (``executor.trading.kill_command``), plugged in by the CLI so
    this layer stays below the exchange."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the flags the exchange half reads."""
        ...

    def asked(self, args: argparse.Namespace) -> bool:
        """Whether the flags ask for the exchange half."""
        ...

    def prepare(self, args: argparse.Namespace) -> Callable[[str], int] | None:
        """What to run once the switch file is engaged (called with the reason, returning the exit
        status), or None when the flags do not ask for it.

        Raises:
            KillUsageError: the flags or variables cannot work (nothing has been changed yet).
        """
        ...


class _Parser(argparse.ArgumentParser):
    # argparse exits 2 on bad usage, which would read as "engaged" to a script checking status.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    parser = _Parser(
        prog="executor killswitch",
        description=(
            "Engage, release or inspect the executor's kill switch file. status exits 2 while "
            "engaged, 0 when released; bad usage and failures exit 1."
        ),
    )
    parser.add_argument(
        "--kill-switch",
        required=True,
        metavar="PATH",
        help="the switch file (the same path given to `executor serve --kill-switch`)",
    )
    # Both optional to argparse, so a missing command is reported in words below rather than as
    # "the following arguments are required: ..., reason" (a reason is never required).
    parser.add_argument("command", metavar="{engage,release,status}", nargs="?")
    parser.add_argument(
        "reason",
        metavar="REASON",
        nargs="*",
        default=[],
        help="engage only: the reason, words joined by spaces",
    )
    return parser


def killswitch_main(argv: list[str], exchange: ExchangeKill | None = None) -> int:
    """``executor killswitch [--kill-switch PATH] {engage [REASON...] | release | status}``.

    ``--kill-switch`` is required: the server has no default switch path either, and a default here
    could engage a file no executor watches. With ``exchange`` (the command line's), ``engage``
    can also cancel through the exchange (``executor.trading.kill_command``).

    Returns:
        The exit status: 0 done (or released, for ``status``), 2 engaged (``status`` only), 1 for
        bad usage, an unknown command or a file-system error, in which case nothing was changed
        and one line went to stderr; 1 too when the switch was engaged but the exchange half failed
        (its lines say so).
    """
    parser = _parser()
    if exchange is not None:
        exchange.add_arguments(parser)
    try:
        args = parser.parse_intermixed_args(argv)
    except _UsageError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except SystemExit as leaving:  # --help
        return EXIT_OK if leaving.code is None else int(leaving.code)
    command: str | None = args.command
    words: list[str] = args.reason
    if command is None:
        print(f"{parser.prog}: a command is required: engage, release or status", file=sys.stderr)
        return EXIT_FAILURE
    if command not in ("engage", "release", "status"):
        print(
            f"{parser.prog}: unknown command {command!r} (expected engage, release or status)",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if words and command != "engage":
        print(f"{parser.prog}: {command} takes no arguments, got {words!r}", file=sys.stderr)
        return EXIT_FAILURE
    after_engage = None
    if exchange is not None and exchange.asked(args):
        if command != "engage":
            print(f"{parser.prog}: only engage acts on the exchange", file=sys.stderr)
            return EXIT_FAILURE
        try:
            after_engage = exchange.prepare(args)
        except KillUsageError as error:
            print(f"{parser.prog}: {error}", file=sys.stderr)
            return EXIT_FAILURE
    switch = KillSwitch(args.kill_switch, ttl_s=0)
    try:
        if command == "engage":
            switch.engage(" ".join(words))
        elif command == "release":
            was_engaged = switch.release()
            print("released" if was_engaged else "released (was not engaged)")
            return EXIT_OK
    except OSError as error:
        print(
            f"{parser.prog}: cannot {command} {switch.path}: {error.strerror or error}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    reason = switch.engaged_reason()
    if reason is None:
        print("released")
        return EXIT_OK
    print(f"engaged: {reason}", flush=True)
    if after_engage is not None:
        return after_engage(reason)
    return EXIT_ENGAGED if command == "status" else EXIT_OK


if __name__ == "__main__":
    sys.exit(killswitch_main(sys.argv[1:]))
