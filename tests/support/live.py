"""A real `executor serve` under Trio, for tests that drive it: start, stop, exit counters."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio


def quiet_serve_command(socket_path: Path, db_path: Path) -> list[str]:
    """``executor serve`` on ``socket_path`` with quiet logging (warnings would flood stderr)."""
    return [
        *(sys.executable, "-m", "executor", "serve", "--socket", str(socket_path)),
        *("--telemetry-db", str(db_path), "--log-level", "error"),
    ]


@asynccontextmanager
async def serving_executor(directory: Path) -> AsyncIterator[trio.Process]:
    """``executor serve`` on ``directory/x.sock`` (rows in ``t.db``, stderr in ``stderr.txt``).

    Yields once the socket exists; on a normal exit sends SIGTERM and waits for the process (its
    ``returncode`` is then the caller's to check). A process still running is killed.
    """
    socket_path = directory / "x.sock"
    # The stderr file is opened before the child starts, so writing it never blocks a task.
    with (directory / "stderr.txt").open("wb") as stderr_file:
        process = await trio.lowlevel.open_process(
            quiet_serve_command(socket_path, directory / "t.db"),
            stderr=stderr_file,
            stdin=subprocess.DEVNULL,
        )
        try:
            with trio.fail_after(30):
                while not socket_path.exists():
                    assert process.poll() is None, "executor exited during start-up"
                    await trio.sleep(0.01)
            yield process
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(60):
                await process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                await process.wait()


def parse_counters(stderr: str) -> dict[str, int]:
    """Every ``key=N`` pair on the executor's two exit lines."""
    lines = [line for line in stderr.splitlines() if line.startswith(("frames=", "telemetry "))]
    assert len(lines) == 2, stderr[-2000:]
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", " ".join(lines))}
