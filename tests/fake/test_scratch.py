"""The fake's throwaway folders: removed at exit; a killed process's, by the next start."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.fake.scratch import (
    COMMAND_PREFIX,
    IN_PROCESS_PREFIX,
    LOCK_NAME,
    STALE_AFTER_S,
    remove_stale_folders,
    scratch_folder,
)
from tests.support.processes import Spawner


def _left_behind(parent: Path, prefix: str, *, locked: bool, age_s: float) -> Path:
    """A folder as a process left it: a key file, its lock file, last changed ``age_s`` ago."""
    folder = parent / f"{prefix}abc{age_s:.0f}{int(locked)}"
    folder.mkdir(mode=0o700)
    (folder / "api-key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (folder / LOCK_NAME).write_text("")
    then = time.time() - age_s
    os.utime(folder, (then, then))
    return folder


@pytest.fixture
def holder() -> Iterator[list[int]]:
    """Descriptors a test locks folders with (a live process's locks), closed at the end."""
    held: list[int] = []
    yield held
    for fd in held:
        os.close(fd)


def test_a_folder_whose_process_is_gone_is_removed(short_dir: Path) -> None:
    """Old enough and its lock free: removed, for either kind of fake."""
    stale = [
        _left_behind(short_dir, prefix, locked=False, age_s=STALE_AFTER_S + 60)
        for prefix in (IN_PROCESS_PREFIX, COMMAND_PREFIX)
    ]
    assert sorted(remove_stale_folders(short_dir)) == sorted(stale)
    assert list(short_dir.iterdir()) == []


def test_a_live_or_young_folder_and_other_names_are_kept(
    short_dir: Path, holder: list[int]
) -> None:
    """A folder whose lock is held, one changed just now, and any other name stay untouched."""
    live = _left_behind(short_dir, IN_PROCESS_PREFIX, locked=True, age_s=STALE_AFTER_S + 60)
    fd = os.open(live / LOCK_NAME, os.O_RDONLY)
    holder.append(fd)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    young = _left_behind(short_dir, IN_PROCESS_PREFIX, locked=False, age_s=0)
    other = short_dir / "something-else"
    other.mkdir()
    then = time.time() - STALE_AFTER_S - 60
    os.utime(other, (then, then))
    assert remove_stale_folders(short_dir) == []
    assert sorted(short_dir.iterdir()) == sorted([live, young, other])


def test_a_scratch_folder_is_private_locked_and_removed(short_dir: Path) -> None:
    """The folder is 0700 and locked while in use, and gone after, however the block ends."""
    with pytest.raises(RuntimeError), scratch_folder(IN_PROCESS_PREFIX, directory=short_dir) as f:
        assert (f.stat().st_mode & 0o777) == 0o700
        probe = os.open(f / LOCK_NAME, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
        raise RuntimeError("the block fails")
    assert list(short_dir.iterdir()) == []


def test_a_sigkilled_fake_executor_leaves_no_key_past_the_next_start(
    spawner: Spawner, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``executor serve --exchange fake`` killed with SIGKILL leaves its key folder; the next
    start with the fake removes it (and keeps its own until its orderly exit)."""
    temporary = short_dir / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    killed = spawner.serve(short_dir / "a.sock", short_dir / "a.db", "--exchange", "fake")
    (orphan,) = temporary.glob(f"{IN_PROCESS_PREFIX}*")
    killed.signal(signal.SIGKILL)
    killed.wait()
    assert (orphan / "api-key.pem").exists()  # what SIGKILL leaves: nothing can run at a kill
    then = time.time() - STALE_AFTER_S - 1
    os.utime(orphan, (then, then))
    second = spawner.serve(short_dir / "b.sock", short_dir / "b.db", "--exchange", "fake")
    folders = list(temporary.glob(f"{IN_PROCESS_PREFIX}*"))
    assert orphan not in folders
    assert len(folders) == 1 and (folders[0] / "api-key.pem").exists()
    second.signal(signal.SIGTERM)
    assert second.wait() == 0
    assert list(temporary.iterdir()) == []
