"""A telemetry file in a folder this process cannot write: the error names the path and the
reason (EROFS or EACCES) in one line; without an exchange an existing file is served read-only.

Both reasons are real: ``EROFS`` from a read-only bind mount of the folder in a mount namespace of
the executor's own (``unshare -m``), ``EACCES`` from a 0555 folder, the executor running without
the capabilities that let root write anywhere (``setpriv``). Each needs root's tools; without them
the case is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.recording.database import close_database, open_database
from tests.support.inprocess import make_wake
from tests.support.processes import (
    EXIT_TIMEOUT_S,
    Executor,
    exit_counters,
    request_all,
    wait_until_accepting,
)

REASONS = {"EROFS": "Read-only file system", "EACCES": "Permission denied"}


def _wrapper(reason: str, folder: Path) -> list[str]:
    """The command prefix under which ``folder`` is unwritable for the executor, for ``reason``."""
    if reason == "EROFS":
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.skip("a read-only bind mount needs root and unshare(1)")
        probe = subprocess.run(
            ["unshare", "-m", "true"], capture_output=True, timeout=EXIT_TIMEOUT_S, check=False
        )
        if probe.returncode != 0:
            pytest.skip(f"unshare -m is not permitted here: {probe.stderr.strip()!r}")
        mount = 'mount --bind -o ro "$0" "$0" && exec "$@"'
        return ["unshare", "-m", "sh", "-c", mount, str(folder)]
    if os.geteuid() != 0:
        return []  # the folder's 0555 mode is enough
    if shutil.which("setpriv") is None:
        pytest.skip("dropping root's file capabilities needs setpriv(1)")
    dropped = "-dac_override,-dac_read_search,-fowner"
    return ["setpriv", f"--inh-caps={dropped}", f"--bounding-set={dropped}"]


class Wrapped(Executor):
    """``executor ARGS`` run under ``prefix``, stderr to a file."""

    def __init__(self, directory: Path, prefix: list[str], *args: str | os.PathLike[str]) -> None:
        self.stderr_path = directory / "wrapped.stderr"
        command = [*prefix, sys.executable, "-m", "executor", *(os.fspath(a) for a in args)]
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr
            )


@pytest.fixture
def folder(short_dir: Path) -> Iterator[Path]:
    """The database's folder, 0555 (the EROFS case mounts it read-only as well)."""
    path = short_dir / "ro"
    path.mkdir()
    yield path
    path.chmod(0o755)


def _earlier_run(db_path: Path) -> None:
    """A database as an earlier executor left it: schema in place, closed, no -wal or -shm."""
    connection, _ = open_database(db_path)
    close_database(connection, db_path)
    assert sorted(path.name for path in db_path.parent.iterdir()) == [db_path.name]


def _run(directory: Path, prefix: list[str], *args: str | os.PathLike[str]) -> Wrapped:
    process = Wrapped(directory, prefix, *args)
    try:
        process.wait(timeout=60)
    finally:
        process.kill()
    return process


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_a_missing_database_in_an_unwritable_folder_names_the_folder_and_the_reason(
    short_dir: Path, folder: Path, reason: str
) -> None:
    """No file to serve and none can be made: one line with the path, the folder and the
    errno's name and words, exit 1, nothing created."""
    prefix = _wrapper(reason, folder)
    folder.chmod(0o555)
    db_path = folder / "t.db"
    ran = _run(
        short_dir, prefix, "serve", "--socket", short_dir / "x.sock", "--telemetry-db", db_path
    )
    assert ran.wait() == 1
    lines = ran.stderr_lines()
    assert lines == [
        f"executor: error: cannot create telemetry database {db_path}: {folder} is not writable "
        f"({reason}: {REASONS[reason]})"
    ]
    assert list(folder.iterdir()) == []
    assert not (short_dir / "x.sock").exists()


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_with_an_exchange_an_existing_database_there_is_refused_naming_the_reason(
    short_dir: Path, folder: Path, reason: str
) -> None:
    """An existing file the executor could read but not write, with an exchange: one line with
    the path and the errno, exit 1 (no trading without the audit trail), the folder untouched."""
    prefix = _wrapper(reason, folder)
    db_path = folder / "t.db"
    _earlier_run(db_path)
    before = db_path.read_bytes()
    folder.chmod(0o555)
    ran = _run(
        short_dir,
        prefix,
        *("serve", "--socket", short_dir / "x.sock", "--telemetry-db", db_path),
        *("--exchange", "fake", "--log-level", "error"),
    )
    assert ran.wait() == 1
    assert ran.stderr_lines() == [
        f"executor: error: telemetry database {db_path} is not writable ({reason}: "
        f"{REASONS[reason]}): with an exchange the executor does not trade without its audit trail"
    ]
    assert sorted(path.name for path in folder.iterdir()) == ["t.db"]
    assert db_path.read_bytes() == before


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_without_an_exchange_an_existing_database_there_is_served_read_only(
    short_dir: Path, folder: Path, reason: str
) -> None:
    """Without an exchange the same file is served: one warning naming it and the errno, wakes
    acked, every row counted as dropped (none lost silently), the file unchanged."""
    prefix = _wrapper(reason, folder)
    db_path = folder / "t.db"
    _earlier_run(db_path)
    before = db_path.read_bytes()
    folder.chmod(0o555)
    socket_path = short_dir / "x.sock"
    process = Wrapped(
        short_dir, prefix, "serve", "--socket", socket_path, "--telemetry-db", db_path
    )
    try:
        wait_until_accepting(process, socket_path)
        acks = request_all(socket_path, [make_wake("ro-1"), make_wake("ro-2")])
        assert [ack.status for ack in acks] == ["accepted", "accepted"]
        process.signal(signal.SIGTERM)
        assert process.wait() == 0
    finally:
        process.kill()
    warnings = [line for line in process.stderr_lines() if "read-only" in line]
    assert len(warnings) == 1
    assert str(db_path) in warnings[0] and f"{reason}: {REASONS[reason]}" in warnings[0]
    server, telemetry = exit_counters(process.stderr_lines())
    assert server["accepted"] == 2
    assert (telemetry["rows_written"], telemetry["dropped_write_failed"]) == (0, 2)
    assert "Traceback" not in process.stderr()
    assert sorted(path.name for path in folder.iterdir()) == ["t.db"]
    assert db_path.read_bytes() == before
