"""Executor processes: command lines, start-up, the completion check, shutdown and row read-back."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Final

READY_TIMEOUT_S: Final = 20.0
"""How long an executor may take to accept its first connection (s); imports dominate."""

COMPLETION_TIMEOUT_S: Final = 30.0
"""How long the last rows may take to be committed after the client exits (s); a guess, generous."""

STOP_TIMEOUT_S: Final = 20.0
"""How long an executor may take to drain and exit after SIGTERM (s)."""

POLL_INTERVAL_S: Final = 0.02
"""Sleep between connect or row-count polls (s); harness-side only, never inside a span."""

COUNT_WAKE_RECV: Final = "SELECT count(*) FROM latency_events WHERE stage = 'wake_recv'"
SELECT_SPAN: Final = "SELECT duration_ms FROM latency_events WHERE stage = ? ORDER BY id"


class BenchError(RuntimeError):
    """A run that cannot be a result: lost frames, an executor that never came up, a bad flag."""


@dataclasses.dataclass(frozen=True)
class ExecutorSpec:
    """A named executor and how to start it (the two flags are appended per run)."""

    name: str
    argv: tuple[str, ...]
    cpus: frozenset[int] = frozenset()
    """The CPUs the executor process is started on (empty: wherever the scheduler puts it)."""
    client_cpus: frozenset[int] = frozenset()
    """The CPUs its clients are started on (empty: anywhere)."""

    def command(self, socket_path: str, database_path: str) -> list[str]:
        """The full command line for one run."""
        return [*self.argv, "--socket", socket_path, "--telemetry-db", database_path]


def executor_spec(name: str) -> ExecutorSpec:
    """Resolve ``trio``, ``asyncio``, ``uvloop`` or ``cmd:COMMAND`` to a start command.

    Raises:
        BenchError: the name is none of those.
    """
    python = sys.executable
    if name == "trio":
        return ExecutorSpec(name, (python, "-m", "executor", "serve"))
    if name in ("asyncio", "uvloop"):
        return ExecutorSpec(name, (python, "-m", "bench.baselines.executor", "--loop", name))
    if name.startswith("cmd:") and name[4:].strip():
        return ExecutorSpec(name, tuple(shlex.split(name[4:])))
    raise BenchError(f"unknown executor {name!r} (trio, asyncio, uvloop or cmd:COMMAND)")


def wait_for_socket(path: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Return once ``path`` accepts a connection.

    Raises:
        BenchError: the process exited first, or the deadline passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise BenchError(f"executor exited with status {process.returncode} before listening")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(path)
                return
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise BenchError(f"executor did not accept connections on {path} within {timeout} s")
        time.sleep(POLL_INTERVAL_S)


def count_wake_recv(database_path: str) -> int:
    """Rows the executor has committed so far (0 while the table does not exist yet)."""
    return _count(database_path, COUNT_WAKE_RECV)


def count_latency_rows(database_path: str) -> int:
    """Every ``latency_events`` row (``wake_recv`` and, with an exchange, the fire's stage rows):
    what an executor's ``rows_written`` counts."""
    return _count(database_path, "SELECT COUNT(*) FROM latency_events")


def _count(database_path: str, query: str) -> int:
    if not os.path.exists(database_path):
        return 0
    with contextlib.closing(sqlite3.connect(database_path, timeout=5.0)) as connection:
        try:
            row = connection.execute(query).fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(row[0])


def wait_for_rows(database_path: str, expected: int, timeout: float) -> int:
    """Poll until exactly ``expected`` rows exist; return the count.

    Raises:
        BenchError: the count passed ``expected`` or the deadline passed short of it.
    """
    deadline = time.monotonic() + timeout
    while True:
        count = count_wake_recv(database_path)
        if count > expected:
            raise BenchError(f"{count} wake_recv rows for {expected} frames sent")
        if count == expected:
            return count
        if time.monotonic() > deadline:
            raise BenchError(
                f"only {count} wake_recv rows for {expected} frames sent after {timeout} s:"
                " a frame or its row was lost; this run is an error, not a result"
            )
        time.sleep(POLL_INTERVAL_S)


def read_span_us(database_path: str, stage: str = "wake_recv") -> list[float]:
    """Every duration of ``stage`` in microseconds, in row order: ``wake_recv`` by default, or
    ``wake_frame`` (a frame's own span, which only an executor started with ``--frame-spans``
    writes: none from any other)."""
    with contextlib.closing(sqlite3.connect(database_path, timeout=5.0)) as connection:
        rows = connection.execute(SELECT_SPAN, (stage,)).fetchall()
    return [float(row[0]) * 1000.0 for row in rows]


class RunningExecutor:
    """An executor process started for one run; a context manager that always stops it."""

    def __init__(
        self,
        spec: ExecutorSpec,
        socket_path: str,
        database_path: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.socket_path = socket_path
        self.database_path = database_path
        self.stderr_text = ""
        # A file, not a pipe: an executor that logs a lot must never block on a full pipe.
        self._stderr_path = database_path + ".stderr"
        with open(self._stderr_path, "wb") as stderr_file:
            self._process = subprocess.Popen(
                spec.command(socket_path, database_path),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr_file,
                env=None if env is None else dict(env),
                preexec_fn=pin_child(spec.cpus),
            )

    def __enter__(self) -> RunningExecutor:
        try:
            wait_for_socket(self.socket_path, self._process, READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> int:
        """SIGTERM, wait for exit (SIGKILL past the deadline); return the exit status."""
        if self._process.returncode is None:
            if self._process.poll() is None:
                self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            with open(self._stderr_path, encoding="utf-8", errors="replace") as stderr_file:
                self.stderr_text = stderr_file.read()
        return self._process.returncode


def pin_child(cpus: frozenset[int]) -> Callable[[], None] | None:
    """A ``preexec_fn`` pinning the child to ``cpus`` before it execs, like ``taskset -c``
    (None when ``cpus`` is empty: no pinning)."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def parse_counters(stderr_text: str) -> dict[str, int]:
    """The ``key=value`` counters an executor prints at exit (both lines, any order)."""
    counters: dict[str, int] = {}
    for line in stderr_text.splitlines():
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep and value.isdigit():
                counters[key] = int(value)
    return counters
