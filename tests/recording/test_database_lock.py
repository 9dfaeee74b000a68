"""The telemetry file's lock: one holder at a time, released on close, safe against a file
replaced between open and lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from executor.recording import database_lock
from executor.recording.database import TelemetryOpenError
from executor.recording.database_lock import DatabaseLock, folder_write_error
from executor.runtime import file_lock


def test_a_second_holder_is_refused_until_the_first_releases(tmp_path: Path) -> None:
    """Two locks on one file: the second is refused naming the file; after release it is taken."""
    db_path = tmp_path / "t.db"
    first, second = DatabaseLock(db_path), DatabaseLock(db_path)
    first.acquire()
    assert first.created and db_path.stat().st_size == 0
    with pytest.raises(TelemetryOpenError, match="another executor is writing telemetry database"):
        second.acquire()
    first.release()
    second.acquire()
    assert not second.created
    second.release()


def test_a_lock_on_a_file_unlinked_meanwhile_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file unlinked between the open and the flock (a refused start cleaning up) is not kept:
    the lock is taken on the file now at the path, so two holders can never split."""
    db_path = tmp_path / "t.db"
    db_path.write_bytes(b"")
    real_flock = file_lock.fcntl.flock
    replaced: list[int] = []

    def flock_after_a_replacement(fd: int, operation: int) -> None:
        if not replaced:
            replaced.append(fd)
            db_path.unlink()
            db_path.write_bytes(b"")
        real_flock(fd, operation)

    monkeypatch.setattr(file_lock.fcntl, "flock", flock_after_a_replacement)
    lock = DatabaseLock(db_path)
    lock.acquire()
    monkeypatch.undo()
    try:
        with pytest.raises(TelemetryOpenError, match="another executor"):
            DatabaseLock(db_path).acquire()  # the file at the path is the one held
    finally:
        lock.release()
    assert len(replaced) == 1


def test_a_writable_folder_has_no_write_error_and_the_probe_leaves_nothing(
    tmp_path: Path,
) -> None:
    """A folder this process may write gives None, without creating anything in it."""
    assert folder_write_error(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_folder_gives_its_error_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the folder refuses a new file, the error creating one is returned (its errno), and
    the folder is as it was."""
    monkeypatch.setattr(database_lock.os, "access", lambda *_args: False)
    real_open = os.open

    def refuse(path: str, flags: int, mode: int = 0o777) -> int:
        if str(path).startswith(str(tmp_path)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(database_lock.os, "open", refuse)
    error = folder_write_error(tmp_path)
    assert error is not None and error.errno == 13
    assert list(tmp_path.iterdir()) == []
