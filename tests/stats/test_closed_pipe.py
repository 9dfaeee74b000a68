"""``executor stats ... | head -1``: a reader that stops early is a normal end (exit 0, silent)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from executor.recording.database import open_database


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """An empty telemetry database as the executor creates it."""
    path = tmp_path / "telemetry.db"
    connection, _ = open_database(path)
    connection.close()
    return path


def run_into_closed_pipe(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m executor ARGV`` with stdout a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head -1` once it has its line: every write now fails (EPIPE)
    try:
        return subprocess.run(
            [sys.executable, "-m", "executor", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("command", ["stats", "orders"])
@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_closed_pipe_is_a_quiet_end(database: Path, command: str, extra: list[str]) -> None:
    """The closed pipe ends the command with status 0 and nothing on stderr (no traceback)."""
    result = run_into_closed_pipe(command, "--telemetry-db", str(database), *extra)
    assert (result.returncode, result.stderr) == (0, b"")


def test_an_open_pipe_still_gets_the_whole_report(database: Path) -> None:
    """The same command into a reader that reads everything prints the whole report."""
    result = subprocess.run(
        [sys.executable, "-m", "executor", "stats", "--telemetry-db", str(database)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert b"heartbeats: 0" in result.stdout
