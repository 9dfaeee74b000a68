"""The kill switch file: engaged/released, reasons, the read cache, and the killswitch command."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from executor.runtime.kill_switch import MAX_REASON_BYTES, NO_REASON, KillSwitch
from executor.trading.kill_command import killswitch_main

REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_absent_file_is_released(tmp_path: Path) -> None:
    """With nothing at the path the switch is released."""
    assert KillSwitch(tmp_path / "halt", ttl_s=0).engaged_reason() is None


def test_empty_file_engages_with_no_reason(tmp_path: Path) -> None:
    """An empty file engages the switch and reports NO_REASON."""
    path = tmp_path / "halt"
    path.touch()
    assert KillSwitch(path, ttl_s=0).engaged_reason() == NO_REASON


def test_whitespace_only_file_engages_with_no_reason(tmp_path: Path) -> None:
    """A file holding only whitespace engages the switch with NO_REASON, not an empty reason."""
    path = tmp_path / "halt"
    path.write_text(" \n\t\n")
    assert KillSwitch(path, ttl_s=0).engaged_reason() == NO_REASON


def test_reason_is_stripped_text(tmp_path: Path) -> None:
    """The reason is the file's text with surrounding whitespace removed."""
    path = tmp_path / "halt"
    path.write_text("  exchange outage, ops paged \n")
    assert KillSwitch(path, ttl_s=0).engaged_reason() == "exchange outage, ops paged"


def test_reason_is_read_up_to_a_bound(tmp_path: Path) -> None:
    """A huge switch file engages the switch but only its first MAX_REASON_BYTES are read."""
    path = tmp_path / "halt"
    path.write_text("x" * (MAX_REASON_BYTES * 4))
    assert KillSwitch(path, ttl_s=0).engaged_reason() == "x" * MAX_REASON_BYTES


def test_directory_at_path_is_engaged(tmp_path: Path) -> None:
    """A directory at the switch path engages it (fail safe), saying it is a directory."""
    path = tmp_path / "halt"
    path.mkdir()
    reason = KillSwitch(path, ttl_s=0).engaged_reason()
    assert reason == "(switch file unreadable: it is a directory)"


def test_fifo_at_path_is_engaged_without_blocking(tmp_path: Path) -> None:
    """A FIFO at the path engages the switch, saying so, without waiting for a writer."""
    path = tmp_path / "halt"
    os.mkfifo(path)
    assert KillSwitch(path, ttl_s=0).engaged_reason() == "(switch file unreadable: it is a FIFO)"


def test_unreadable_file_is_engaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A switch file that cannot be opened (permission denied) engages it, saying why."""
    path = tmp_path / "halt"
    path.write_text("a reason nobody can read")

    def refuse(*args: object, **kwargs: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied")

    # Simulated, because the suite may run as root, which reads a chmod-000 file anyway.
    monkeypatch.setattr(os, "open", refuse)
    reason = KillSwitch(path, ttl_s=0).engaged_reason()
    assert reason == "(switch file unreadable: Permission denied)"


def test_parent_that_is_a_file_means_released(tmp_path: Path) -> None:
    """A path under a regular file (ENOTDIR) cannot hold a switch, so it is released."""
    parent = tmp_path / "not-a-directory"
    parent.write_text("")
    assert KillSwitch(parent / "halt", ttl_s=0).engaged_reason() is None


def test_cache_hides_a_change_until_the_ttl_passes(tmp_path: Path) -> None:
    """Within ttl_s a reading is reused; once ttl_s has passed the file is read again."""
    path = tmp_path / "halt"
    clock = FakeClock()
    switch = KillSwitch(path, ttl_s=1.0, clock=clock)
    assert switch.engaged_reason() is None
    path.write_text("halt")
    clock.now += 0.999
    assert switch.engaged_reason() is None
    clock.now += 0.001
    assert switch.engaged_reason() == "halt"
    path.unlink()
    clock.now += 0.5
    assert switch.engaged_reason() == "halt"
    clock.now += 0.5
    assert switch.engaged_reason() is None


def test_zero_ttl_sees_a_change_at_once(tmp_path: Path) -> None:
    """With ttl_s 0 every call reads the file, even with the clock standing still."""
    path = tmp_path / "halt"
    switch = KillSwitch(path, ttl_s=0, clock=FakeClock())
    assert switch.engaged_reason() is None
    path.write_text("halt")
    assert switch.engaged_reason() == "halt"
    path.unlink()
    assert switch.engaged_reason() is None


@pytest.mark.parametrize("ttl_s", [-1.0, float("nan")])
def test_invalid_ttl_is_refused(tmp_path: Path, ttl_s: float) -> None:
    """A negative or NaN ttl_s is a ValueError."""
    with pytest.raises(ValueError, match="ttl_s"):
        KillSwitch(tmp_path / "halt", ttl_s=ttl_s)


def test_engage_release_round_trip(tmp_path: Path) -> None:
    """engage writes the reason (creating parents), release removes it and reports what it found."""
    path = tmp_path / "ops" / "switches" / "halt"
    switch = KillSwitch(path, ttl_s=60.0, clock=FakeClock())
    assert switch.engaged_reason() is None
    switch.engage("maintenance window")
    assert path.read_text() == "maintenance window"
    assert switch.engaged_reason() == "maintenance window"  # its own change skips the cache
    switch.engage("second reason")
    assert switch.engaged_reason() == "second reason"
    assert switch.release() is True
    assert not path.exists()
    assert switch.engaged_reason() is None
    assert switch.release() is False
    assert list(path.parent.iterdir()) == []  # no temporary file left behind


def test_engage_without_reason_writes_an_empty_file(tmp_path: Path) -> None:
    """engage() with no reason leaves an empty file, which reads as engaged with NO_REASON."""
    path = tmp_path / "halt"
    switch = KillSwitch(path, ttl_s=0)
    switch.engage()
    assert path.read_bytes() == b""
    assert switch.engaged_reason() == NO_REASON


def test_engaged_file_is_readable_by_others(tmp_path: Path) -> None:
    """engage leaves a 0644 file, so an executor running as another user can read the reason."""
    path = tmp_path / "halt"
    KillSwitch(path).engage("halt")
    assert path.stat().st_mode & 0o777 == 0o644


def test_failed_engage_leaves_no_temporary_file(tmp_path: Path) -> None:
    """engage onto a directory raises OSError and leaves nothing new beside it."""
    path = tmp_path / "halt"
    path.mkdir()
    with pytest.raises(OSError):
        KillSwitch(path).engage("halt")
    assert [entry.name for entry in tmp_path.iterdir()] == ["halt"]


# The command line, in process.


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run killswitch_main and return (exit status, stdout, stderr)."""
    status = killswitch_main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_status_engage_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """status exits 0 released and 2 engaged; engage joins a multi-word reason; release exits 0."""
    path = str(tmp_path / "halt")
    assert run_main(capsys, "--kill-switch", path, "status") == (0, "released\n", "")
    status, out, _ = run_main(
        capsys, "--kill-switch", path, "engage", "market", "halted", "by", "ops"
    )
    assert (status, out) == (0, "engaged: market halted by ops\n")
    assert run_main(capsys, "status", "--kill-switch", path) == (
        2,
        "engaged: market halted by ops\n",
        "",
    )
    assert run_main(capsys, "--kill-switch", path, "release") == (0, "released\n", "")
    assert run_main(capsys, "--kill-switch", path, "status") == (0, "released\n", "")
    assert run_main(capsys, "--kill-switch", path, "release")[0] == 0


def test_cli_flag_may_follow_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--kill-switch may come after the reason words without eating or splitting them."""
    path = tmp_path / "halt"
    status, _, err = run_main(capsys, "engage", "two", "words", "--kill-switch", str(path))
    assert (status, err) == (0, "")
    assert path.read_text() == "two words"


def test_cli_engage_without_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """engage with no words engages with NO_REASON."""
    path = str(tmp_path / "halt")
    assert run_main(capsys, "--kill-switch", path, "engage")[:2] == (0, f"engaged: {NO_REASON}\n")
    assert run_main(capsys, "--kill-switch", path, "status")[0] == 2


@pytest.mark.parametrize("engaged", [False, True])
def test_cli_unknown_command_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engaged: bool
) -> None:
    """An unknown command exits 1 with one line on stderr and leaves the switch as it was."""
    path = tmp_path / "halt"
    if engaged:
        path.write_text("kept")
    status, out, err = run_main(capsys, "--kill-switch", str(path), "disengage", "now")
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and "unknown command 'disengage'" in err
    assert path.exists() is engaged
    if engaged:
        assert path.read_text() == "kept"


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],  # --kill-switch missing
        ["--kill-switch"],  # its value missing
        [],
        ["--kill-switch", "PATH", "status", "extra"],
        ["--kill-switch", "PATH", "release", "extra"],
        ["--kill-switch", "PATH", "--bogus", "status"],
    ],
)
def test_cli_bad_usage_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Bad usage exits 1 (not argparse's 2, which means engaged) with one stderr line, no change."""
    path = tmp_path / "halt"
    argv = [str(path) if word == "PATH" else word for word in argv]
    status, out, err = run_main(capsys, *argv)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("executor killswitch: ")
    assert not path.exists()


def test_cli_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints usage and exits 0."""
    status, out, _ = run_main(capsys, "--help")
    assert status == 0 and "--kill-switch" in out


def test_cli_file_system_error_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An engage that cannot write (a directory is in the way) exits 1 with one stderr line."""
    path = tmp_path / "halt"
    path.mkdir()
    status, out, err = run_main(capsys, "--kill-switch", str(path), "engage", "x")
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and "cannot engage" in err


# The command line, as a real process.


def run_process(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m executor.trading.kill_command`` with ``argv``."""
    return subprocess.run(
        [sys.executable, "-m", "executor.trading.kill_command", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_module_as_process_exit_codes(tmp_path: Path) -> None:
    """``python -m executor.trading.kill_command`` exits 2 for status while engaged and 0 once
    released."""
    path = str(tmp_path / "halt")
    engaged = run_process("--kill-switch", path, "engage", "from", "a", "shell")
    assert (engaged.returncode, engaged.stdout) == (0, "engaged: from a shell\n")
    status = run_process("--kill-switch", path, "status")
    assert (status.returncode, status.stdout) == (2, "engaged: from a shell\n")
    assert run_process("--kill-switch", path, "release").returncode == 0
    released = run_process("--kill-switch", path, "status")
    assert (released.returncode, released.stdout, released.stderr) == (0, "released\n", "")


def test_status_on_a_directory_says_why_it_is_engaged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``status`` on a directory exits 2 (engaged, fail safe) and says the path is a directory."""
    path = tmp_path / "halt"
    path.mkdir()
    assert run_main(capsys, "--kill-switch", str(path), "status")[:2] == (
        2,
        "engaged: (switch file unreadable: it is a directory)\n",
    )
