"""Real executor processes for subprocess tests: start, wait, signal, read the exit counters.

Every process is started through ``Executor``, which gives each wait a hard timeout; the ``spawner``
fixture (conftest) kills whatever a test leaves running, so a failing test never leaks an executor.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.wire.protocol import (
    PREFIX_BYTES,
    WakeAck,
    WakeMessage,
    decode_wake_ack,
    encode_frame,
    parse_frame_length,
)

START_TIMEOUT_S = 30.0
"""Longest wait for a fresh executor to accept connections (interpreter start, busy 2-core box):
a hang bound, never a speed claim. 15 s was exceeded four times in one CI run (2026-12-06: two
suites side by side, load average 10-17 from other work on the machine)."""


EXIT_TIMEOUT_S = 10.0
"""Longest wait for an executor to exit once told to; far below the 30 s grace used below."""


IO_TIMEOUT_S = 5.0
"""Longest wait for one ack on a blocking test socket."""


POLL_INTERVAL_S = 0.02
"""Pause between readiness probes: short enough not to slow the suite, long enough not to spin."""

LOG_LINE_TIMEOUT_S = 15.0
"""Longest a log line may take to reach stderr: log lines are written off the event loop, so a
socket can accept before the line announcing it lands (seen in CI under load)."""

SERVER_KEYS = (
    "frames",
    "accepted",
    "rejected",
    "fired",
    "refused_price",
    "refused_kill_switch",
)
"""The C++ port's counter keys, in its order; this executor's keys follow them."""


EXTRA_SERVER_KEYS = (
    "unacked",
    "fires_cancelled",
    "fire_errors",
    "refused_volume",
    "refused_risk",
    "refused_permission",
    "dispatch_errors",
    "shadow_skipped",
    "log_dropped",
    "reconciled",
    "reconcile_failed",
    "presigned",
    "signed_inline",
    "refused_audit",
    "stream_connected",
    "stream_reconnects",
    "stream_fill_messages",
    "stream_order_messages",
    "stream_fills_applied",
    "stream_orders_applied",
    "cancels_sent",
    "cancels_failed",
    "order_group_triggered",
    "write_token_waits",
    "read_token_waits",
    "lookups_unknown",
    "orders_open",
    "adopted",
    "refused_order_group",
    "refused_paused",
    "trading_paused",
)
"""This executor's additions, at the end of the first counter line."""
LATER_SERVER_KEYS = EXTRA_SERVER_KEYS[EXTRA_SERVER_KEYS.index("log_dropped") + 1 :]
"""The keys after ``log_dropped``, oldest first: each new key goes at the end."""


TELEMETRY_KEYS = (
    "rows_written",
    "dropped_ring_full",
    "dropped_oversized_id",
    "dropped_write_failed",
)
"""The second counter line's keys (the C++ port's)."""


EXTRA_TELEMETRY_KEYS = (
    "order_rows_written",
    "order_rows_dropped",
    "audit_outages",
    "audit_unavailable",
    "order_rows_kept",
    "journal_replayed",
    "journal_torn",
)
"""This executor's additions (orders_fired rows), at the end of the second counter line."""


def executor_command(*args: str | os.PathLike[str]) -> list[str]:
    """``python -m executor ARGS`` with this interpreter (the venv's: the package is importable)."""
    return [sys.executable, "-m", "executor", *(os.fspath(arg) for arg in args)]


class Executor:
    """One ``executor serve`` process whose stderr goes to a file (no pipe can fill up)."""

    def __init__(
        self,
        directory: Path,
        *args: str | os.PathLike[str],
        name: str,
        command: list[str] | None = None,
    ) -> None:
        self.stderr_path = directory / f"{name}.stderr"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                executor_command(*args) if command is None else command,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
            )

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process."""
        self.process.send_signal(signum)

    def wait(self, timeout: float = EXIT_TIMEOUT_S) -> int:
        """The exit status, waiting at most ``timeout`` seconds (TimeoutExpired otherwise)."""
        return self.process.wait(timeout=timeout)

    def stderr(self) -> str:
        """Everything the process has written to stderr (and stdout) so far."""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stderr_lines(self) -> list[str]:
        """The non-empty stderr lines."""
        return [line for line in self.stderr().splitlines() if line.strip()]

    def kill(self) -> None:
        """SIGKILL the process if it is still alive, and reap it."""
        if self.alive():
            self.process.kill()
        self.process.wait(timeout=EXIT_TIMEOUT_S)


class Spawner:
    """Starts executors for one test and kills whatever is left at teardown."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Executor] = []

    def start(self, *args: str | os.PathLike[str]) -> Executor:
        """Run ``executor ARGS`` without waiting for anything."""
        executor = Executor(self.directory, *args, name=f"p{len(self.started)}")
        self.started.append(executor)
        return executor

    def start_command(self, command: list[str]) -> Executor:
        """Run ``command``, an executor started some other way (e.g. as another user)."""
        executor = Executor(self.directory, name=f"p{len(self.started)}", command=command)
        self.started.append(executor)
        return executor

    def serve(self, socket_path: Path, db_path: Path, *extra: str | os.PathLike[str]) -> Executor:
        """Start ``executor serve`` on these paths and wait until its socket accepts."""
        executor = self.start("serve", "--socket", socket_path, "--telemetry-db", db_path, *extra)
        wait_until_accepting(executor, socket_path)
        return executor

    def run(self, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
        """Run ``executor ARGS`` to completion (killed if it overruns the exit timeout)."""
        return subprocess.run(
            executor_command(*args),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=EXIT_TIMEOUT_S,
            check=False,
        )

    def kill_all(self) -> None:
        """Kill every process still running."""
        for executor in self.started:
            executor.kill()


def wait_until_accepting(executor: Executor, socket_path: Path) -> None:
    """Poll until ``socket_path`` accepts a connection; fail if the process dies or time is up."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if not executor.alive():
            pytest.fail(
                f"executor exited with {executor.wait()} before serving:\n{executor.stderr()}"
            )
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(os.fspath(socket_path))
            except (FileNotFoundError, ConnectionRefusedError):
                pass
            else:
                return
        if time.monotonic() > deadline:
            pytest.fail(f"executor did not accept on {socket_path} within {START_TIMEOUT_S} s")
        time.sleep(POLL_INTERVAL_S)


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes from a blocking socket (EOFError if it closes first)."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def receive_ack(sock: socket.socket) -> WakeAck:
    """Read and decode one ack frame."""
    length = parse_frame_length(receive_exactly(sock, PREFIX_BYTES))
    return decode_wake_ack(receive_exactly(sock, length))


def open_client(socket_path: Path) -> socket.socket:
    """A blocking client connection with a read/write timeout."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(IO_TIMEOUT_S)
    sock.connect(os.fspath(socket_path))
    return sock


def request_all(socket_path: Path, messages: list[WakeMessage]) -> list[WakeAck]:
    """Send each message on one connection and read its ack before the next one."""
    with open_client(socket_path) as sock:
        acks = []
        for message in messages:
            sock.sendall(encode_frame(message))
            acks.append(receive_ack(sock))
    return acks


def parse_counters(line: str, prefix: str = "") -> dict[str, int]:
    """``key=value`` pairs of one counter line, in order (after ``prefix``)."""
    assert line.startswith(prefix), line
    pairs = [field.split("=", 1) for field in line[len(prefix) :].split()]
    assert all(len(pair) == 2 for pair in pairs), line
    return {key: int(value) for key, value in pairs}


def exit_counters(stderr_lines: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The server and telemetry counters from the last two stderr lines, format checked."""
    assert len(stderr_lines) >= 2, stderr_lines
    server = parse_counters(stderr_lines[-2])
    telemetry = parse_counters(stderr_lines[-1], prefix="telemetry ")
    assert tuple(server)[: len(SERVER_KEYS)] == SERVER_KEYS
    assert tuple(server)[len(SERVER_KEYS) :] == EXTRA_SERVER_KEYS
    assert tuple(telemetry)[: len(TELEMETRY_KEYS)] == TELEMETRY_KEYS
    assert tuple(telemetry)[len(TELEMETRY_KEYS) :] == EXTRA_TELEMETRY_KEYS
    return server, telemetry


def wake_recv_count(db_path: Path) -> int:
    """How many wake_recv rows the database holds."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        (count,) = db.execute(
            "SELECT COUNT(*) FROM latency_events WHERE stage = 'wake_recv'"
        ).fetchone()
    return int(count)


def assert_one_line_failure(run: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A refusal: non-zero, exactly one stderr line naming the problem, no traceback."""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode != 0
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


def metrics_port(executor: Executor) -> int:
    """The port an executor logged for its metrics endpoint (JSON log lines), once the line is
    out (within ``LOG_LINE_TIMEOUT_S``)."""
    deadline = time.monotonic() + LOG_LINE_TIMEOUT_S
    while True:
        for line in executor.stderr_lines():
            if line.startswith("{") and '"metrics endpoint listening"' in line:
                return int(json.loads(line)["port"])
        if time.monotonic() > deadline:
            raise AssertionError(f"no metrics line in:\n{executor.stderr()}")
        time.sleep(POLL_INTERVAL_S)
