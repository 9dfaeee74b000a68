"""The real executor as a subprocess, for the soak and the reliability tests.

:class:`ExecutorProcess` starts ``python -m executor serve`` with its stderr in a file (never a
pipe: an unread pipe would stall the executor's logging), waits for its socket, signals it, and
reads the two counter lines it prints at exit. :func:`identity_problems` checks SERVICE.md's
accounting on those counters, and the database helpers read back what the executor wrote.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from bench.harness.processes import parse_counters

READY_TIMEOUT_S: Final = 20.0
"""How long a fresh executor may take to accept a connection (s); interpreter start dominates."""

EXIT_SLACK_S: Final = 15.0
"""How long past its grace period an executor may take to exit after SIGTERM (s): the telemetry
drain of a full channel plus the database close. Generous: a bound on a hang, not a measurement."""


class ExecutorProcess:
    """One ``python -m executor serve`` process; stderr goes to a file, never a pipe."""

    def __init__(
        self,
        socket_path: Path,
        db_path: Path,
        *,
        grace_s: float = 5.0,
        extra_args: Iterable[str] = (),
        log_level: str = "warning",
    ) -> None:
        self.socket_path = socket_path
        self.db_path = db_path
        self.grace_s = grace_s
        self.stderr_path = Path(f"{db_path}.{time.monotonic_ns()}.stderr")
        command = [
            sys.executable,
            "-m",
            "executor",
            "serve",
            "--socket",
            str(socket_path),
            "--telemetry-db",
            str(db_path),
            "--grace",
            str(grace_s),
            "--log-format",
            "json",
            "--log-level",
            log_level,
            *extra_args,
        ]
        with open(self.stderr_path, "wb") as stderr_file:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr_file
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Return once the socket accepts a connection.

        Raises:
            RuntimeError: the process exited first, or the deadline passed.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"executor exited with {self.process.returncode} before listening: "
                    + self.stderr_text()[-2000:]
                )
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(self.socket_path))
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"executor did not listen on {self.socket_path}")
            time.sleep(0.02)

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int | None:
        """The exit status, or None if the process is still running after ``timeout_s``."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL and reap (a no-op once the process has exited)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def stop(self, signum: int = signal.SIGTERM) -> int | None:
        """Signal, then wait up to grace + slack; None (and a SIGKILL) if it did not exit."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        status = self.wait(self.grace_s + EXIT_SLACK_S)
        if status is None:
            self.kill()
        return status

    def peak_rss_kib(self) -> int:
        """The process's peak resident set (VmHWM, KiB) while it runs; 0 once it has gone."""
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def counters(self) -> dict[str, int]:
        """The two counter lines printed at exit, as one dict.

        Raises:
            ValueError: either line is missing.
        """
        return parse_exit_counters(self.stderr_text())


def parse_exit_counters(stderr_text: str) -> dict[str, int]:
    """Parse ``frames=... accepted=...`` and ``telemetry rows_written=...`` (both required).

    Raises:
        ValueError: either line is missing.
    """
    lines = stderr_text.splitlines()
    frames_lines = [line for line in lines if line.startswith("frames=")]
    telemetry_lines = [line for line in lines if line.startswith("telemetry ")]
    if len(frames_lines) != 1 or len(telemetry_lines) != 1:
        raise ValueError(f"expected one of each counter line, stderr ends: {stderr_text[-500:]!r}")
    return parse_counters(frames_lines[0] + "\n" + telemetry_lines[0])


def identity_problems(counters: dict[str, int]) -> list[str]:
    """What breaks SERVICE.md's accounting; empty when every frame is accounted for.

    ``fires_cancelled`` and ``fire_errors`` are subsets of ``fired`` in this executor (a fire is
    counted before its dispatcher is awaited), so they do not appear in the fire identity.
    """
    c = counters
    delivered = c["accepted"] - c["unacked"]
    problems = []
    if c["frames"] != c["accepted"] + c["rejected"]:
        problems.append(f"frames {c['frames']} != accepted + rejected")
    # The order path's refusals (DISPATCH.md §1); absent from older and C++ exit lines.
    refused = (
        "refused_volume",
        "refused_risk",
        "refused_permission",
        "refused_audit",
        "refused_order_group",
        "refused_paused",
    )
    fires = c["fired"] + c["refused_price"] + c["refused_kill_switch"]
    fires += sum(c.get(key, 0) for key in refused)
    if delivered != fires:
        problems.append(f"accepted - unacked = {delivered} but fire outcomes = {fires}")
    rows = (
        c["rows_written"]
        + c["dropped_ring_full"]
        + c["dropped_oversized_id"]
        + c["dropped_write_failed"]
    )
    if delivered != rows:
        problems.append(f"accepted - unacked = {delivered} but telemetry outcomes = {rows}")
    return problems


# --- the database -----------------------------------------------------------------------------


def wake_recv_count(db_path: Path) -> int:
    """``wake_recv`` rows in the file (0 when it or the table does not exist)."""
    if not db_path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0)) as db:
        try:
            (count,) = db.execute(
                "SELECT count(*) FROM latency_events WHERE stage = 'wake_recv'"
            ).fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(count)


def ids_with_prefix(db_path: Path, prefix: str) -> set[str]:
    """The correlation ids of ``wake_recv`` rows starting with ``prefix`` (an index range scan)."""
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0)) as db:
        rows = db.execute(
            "SELECT correlation_id FROM latency_events"
            " WHERE correlation_id >= ? AND correlation_id < ? AND stage = 'wake_recv'",
            (prefix, upper),
        ).fetchall()
    return {row[0] for row in rows}


def integrity_check(db_path: Path) -> str:
    """``PRAGMA integrity_check``'s answer (``ok`` when the file is sound)."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0)) as db:
        return "; ".join(str(row[0]) for row in db.execute("PRAGMA integrity_check").fetchall())


__all__ = [
    "EXIT_SLACK_S",
    "READY_TIMEOUT_S",
    "ExecutorProcess",
    "identity_problems",
    "ids_with_prefix",
    "integrity_check",
    "parse_exit_counters",
    "wake_recv_count",
]
