"""The single-instance lock: a failed start removes the lock file it created, safely."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from executor.wire.unixsocket import InstanceLock, SocketSetupError, lock_path_for


def test_a_failed_start_removes_the_lock_file_it_created(short_dir: Path) -> None:
    """release(remove_created=True) unlinks a lock file this acquire created; a plain release
    leaves it (the normal exit)."""
    socket_path = short_dir / "x.sock"
    first = InstanceLock(socket_path)
    first.acquire()
    assert first.created
    first.release(remove_created=True)
    assert not lock_path_for(socket_path).exists()
    second = InstanceLock(socket_path)
    second.acquire()
    second.release()
    assert lock_path_for(socket_path).exists()


def test_a_lock_file_that_was_there_before_is_kept(short_dir: Path) -> None:
    """A lock file left by an earlier run is not this run's to remove, even on a failed start."""
    socket_path = short_dir / "x.sock"
    lock_path_for(socket_path).write_bytes(b"")
    lock = InstanceLock(socket_path)
    lock.acquire()
    assert not lock.created
    lock.release(remove_created=True)
    assert lock_path_for(socket_path).exists()


def test_a_lock_on_an_unlinked_file_is_not_a_lock(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that opened the lock file just before a failed start unlinked it, and locks
    that old file afterwards, notices and starts over on the file now at the path: it cannot
    run beside the executor that holds the new one."""
    socket_path = short_dir / "x.sock"
    failed_start = InstanceLock(socket_path)
    failed_start.acquire()
    stale_fd = os.open(lock_path_for(socket_path), os.O_RDWR)  # opened, not yet locked
    failed_start.release(remove_created=True)
    holder = InstanceLock(socket_path)
    holder.acquire()  # a fresh file at the path
    late = InstanceLock(socket_path)
    opens = [(stale_fd, False)]
    real_open = late._open
    monkeypatch.setattr(late, "_open", lambda: opens.pop() if opens else real_open())
    with pytest.raises(SocketSetupError, match="another executor is running"):
        late.acquire()
    holder.release()


def test_a_failed_start_removes_the_folders_it_made(short_dir: Path) -> None:
    """The socket's missing folders, made by acquire, are removed with the lock file; a folder
    that holds something else stays."""
    socket_path = short_dir / "a" / "b" / "x.sock"
    lock = InstanceLock(socket_path)
    lock.acquire()
    assert (short_dir / "a" / "b").is_dir()
    lock.release(remove_created=True)
    assert list(short_dir.iterdir()) == []
    kept = InstanceLock(socket_path)
    kept.acquire()
    (short_dir / "a" / "other").write_text("not ours")
    kept.release(remove_created=True)
    assert sorted(path.name for path in (short_dir / "a").iterdir()) == ["other"]
