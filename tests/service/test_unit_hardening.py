"""The systemd unit's hardening: ``systemd-analyze`` accepts and rates it, the documents list
exactly what it sets, and the executor still starts, pins and trades under its system-call filter.

No systemd runs as PID 1 where this suite runs, so the service is never started by systemd here:
the unit's seccomp settings are rebuilt and loaded by ``tests/support/sandbox.py`` instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import sandbox
from tests.support.inprocess import make_wake
from tests.support.processes import (
    EXIT_TIMEOUT_S,
    Spawner,
    executor_command,
    exit_counters,
    metrics_port,
    request_all,
    wait_until_accepting,
)

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "trio-executor.service"
OPERATIONS = ROOT / "docs" / "operations" / "deployment.md"

MAX_EXPOSURE = 2.5
"""The highest exposure ``systemd-analyze security`` rates "OK" (issue 23, item 11)."""

EXPOSURE_LINE = re.compile(r"Overall exposure level for \S+: (\d+\.\d) (\w+)")
HARDENING_START = "# Hardening"
"""The comment that opens the unit's hardening block; the block ends at the next blank line."""

SIGSYS_EXIT = -signal.SIGSYS
"""A process killed by the system-call filter (systemd's default action)."""

needs_tools = pytest.mark.skipif(sandbox.available() is not None, reason=str(sandbox.available()))


def installed_unit(directory: Path, text: str | None = None) -> Path:
    """The unit as installed here: ExecStart pointed at this environment's executor."""
    path = directory / "trio-executor.service"
    executable = Path(sys.prefix) / "bin" / "executor"
    unit_text = UNIT.read_text() if text is None else text
    path.write_text(unit_text.replace("/opt/trio-executor/.venv/bin/executor", str(executable)))
    return path


def exposure(unit: Path) -> tuple[float, str]:
    """``systemd-analyze security --offline=yes``'s overall exposure and its word (OK, ...)."""
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    match = EXPOSURE_LINE.search(result.stdout)
    assert match is not None, result.stdout + result.stderr
    return float(match.group(1)), match.group(2)


def hardening_lines(text: str) -> list[str]:
    """The ``Key=value`` lines of the unit's hardening block, in order."""
    lines = text.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(HARDENING_START))
    block: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            break
        if not line.startswith("#"):
            block.append(line.strip())
    return block


def without_hardening(text: str) -> str:
    """The unit with its hardening block taken out (the unit as it was before it)."""
    kept = set(hardening_lines(text))
    return "\n".join(line for line in text.splitlines() if line.strip() not in kept) + "\n"


@needs_tools
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """``systemd-analyze verify`` accepts the unit and has nothing to say about any of its
    lines (an unknown or misspelt option would be a warning naming the unit)."""
    result = subprocess.run(
        ["systemd-analyze", "verify", str(installed_unit(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    problems = [line for line in result.stderr.splitlines() if "trio-executor" in line]
    assert result.returncode == 0 and not problems, result.stderr


@needs_tools
def test_unit_exposure_is_ok(tmp_path: Path) -> None:
    """``systemd-analyze security`` rates the unit at most 2.5, "OK"."""
    score, verdict = exposure(installed_unit(tmp_path))
    assert score <= MAX_EXPOSURE and verdict == "OK", (score, verdict)


@needs_tools
def test_the_exposure_check_sees_an_unhardened_unit(tmp_path: Path) -> None:
    """Negative twin: without its hardening block the same unit rates far worse than 2.5."""
    score, verdict = exposure(installed_unit(tmp_path, without_hardening(UNIT.read_text())))
    assert score > MAX_EXPOSURE and verdict != "OK", (score, verdict)


def test_operations_lists_exactly_the_hardening_the_unit_sets() -> None:
    """The hardening table of the guide names each ``Key=value`` the unit's block sets, no
    more and no fewer (no "ProtectKernel*" standing for options that are not there)."""
    text = OPERATIONS.read_text()
    table = text[text.index("| hardening |") :].split("\n\n", 1)[0]
    documented = re.findall(r"^\| `([A-Za-z]+=[^`]*)` \|", table, flags=re.MULTILINE)
    assert sorted(documented) == sorted(hardening_lines(UNIT.read_text()))
    assert "SystemCallFilter=@system-service" in documented  # the block was found
    assert "*" not in table.split("\n", 2)[2]


# ---------------------------------------------------------------- under the system-call filter


def unit_sandbox() -> sandbox.Sandbox:
    """The shipped unit's seccomp restrictions."""
    return sandbox.sandbox_of(UNIT.read_text())


def seccomp_status(pid: int) -> dict[str, str]:
    """The seccomp, no_new_privs and capability lines of a process's status."""
    keys = ("Seccomp", "NoNewPrivs", "CapEff", "CapBnd")
    fields = (line.partition(":") for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {key: value.strip() for key, _, value in fields if key in keys}


@needs_tools
def test_the_executor_starts_pins_and_trades_under_the_unit_filter(
    spawner: Spawner, short_dir: Path
) -> None:
    """Under the unit's filter (killing on any call outside it), with no capabilities: the
    executor starts with the fake exchange (its signing-ahead worker process signs before the
    socket appears), pins its loop with --cpu, gives its socket to a group, serves /metrics,
    fills three real orders and stops in order."""
    allowed = sorted(os.sched_getaffinity(0))
    loop_cpu = allowed[-1]
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    command = executor_command(
        *("serve", "--socket", socket_path, "--telemetry-db", db_path, "--exchange", "fake"),
        *("--cpu", str(loop_cpu), "--metrics", "127.0.0.1:0", "--log-format", "json"),
        *("--socket-mode", "0660", "--socket-group", str(os.getegid())),
    )
    executor = spawner.start_command(sandbox.sandboxed(unit_sandbox(), command))
    wait_until_accepting(executor, socket_path)
    status = seccomp_status(executor.pid)
    assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1", status
    assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0, status
    assert os.sched_getaffinity(executor.pid) == {loop_cpu}  # the loop thread is the main one
    others = [int(task) for task in os.listdir(f"/proc/{executor.pid}/task")]
    if len(allowed) > 1:
        assert all(
            loop_cpu not in os.sched_getaffinity(task) for task in others if task != executor.pid
        )
    children = [  # each thread's children: the workers are started from a worker thread
        child
        for task in others
        for child in Path(f"/proc/{executor.pid}/task/{task}/children").read_text().split()
    ]
    assert children, "no signing worker process is running"
    port = metrics_port(executor)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert b"trio_executor_accepted_total" in reply.read()
    for n in range(3):  # one at a time: the risk gate allows two dispatches in flight
        ticker = f"KXBTCD-26AUG29{17 + n}-T112750"  # three events: the position cap is per event
        wake = make_wake(f"filtered-{n}", exchange_index=0, market_ticker=ticker)
        assert request_all(socket_path, [wake])[0].status == "accepted"
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while filled(db_path) <= n:
            assert time.monotonic() < deadline and executor.alive(), executor.stderr()[-3000:]
            time.sleep(0.05)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0, executor.stderr()[-3000:]
    counters, _ = exit_counters(executor.stderr_lines())
    assert counters["fired"] == 3 and counters["fire_errors"] == 0
    assert counters["presigned"] + counters["signed_inline"] == 3


def filled(db_path: Path) -> int:
    """How many orders the audit trail records as filled (0 before the table exists)."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=5)) as db:
        try:
            (count,) = db.execute(
                "SELECT COUNT(*) FROM orders_fired WHERE status = 'filled'"
            ).fetchone()
        except sqlite3.OperationalError:  # not created yet
            return 0
    return int(count)


@needs_tools
@pytest.mark.parametrize(
    ("removed", "flags"),
    [
        ("sched_setaffinity", ("--cpu", str(min(os.sched_getaffinity(0))))),
        ("chown", ("--socket-mode", "0660", "--socket-group", str(os.getegid()))),
    ],
)
def test_without_the_calls_the_unit_keeps_the_executor_is_killed(
    short_dir: Path, removed: str, flags: tuple[str, ...]
) -> None:
    """Negative twin: the filter is really loaded, and the unit's filter keeps what the flags
    need: without sched_setaffinity, ``--cpu`` is killed by SIGSYS; without the chown calls,
    ``--socket-group`` is."""
    narrowed = dataclasses.replace(
        unit_sandbox(),
        allowed_calls=[call for call in unit_sandbox().allowed_calls if removed not in call],
    )
    assert len(narrowed.allowed_calls) < len(unit_sandbox().allowed_calls)
    command = executor_command(
        *("serve", "--socket", short_dir / "x.sock", "--telemetry-db", short_dir / "t.db"),
        *flags,
    )
    run = subprocess.run(
        sandbox.sandboxed(narrowed, command),
        capture_output=True,
        timeout=EXIT_TIMEOUT_S * 3,
        check=False,
    )
    assert run.returncode == SIGSYS_EXIT, run.stderr.decode()[-2000:]


_WRITE_AND_EXECUTE = """
import mmap
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except PermissionError:
    print("refused")
else:
    print("mapped")
"""


@needs_tools
def test_memory_deny_write_execute_is_in_the_sandbox() -> None:
    """The sandbox refuses a writable and executable mapping (so the executor's run above had
    MemoryDenyWriteExecute in force); without the sandbox the same mapping is made."""
    command = [sys.executable, "-c", _WRITE_AND_EXECUTE]
    inside = subprocess.run(
        sandbox.sandboxed(unit_sandbox(), command),
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S * 3,
        check=True,
    )
    outside = subprocess.run(
        command, capture_output=True, text=True, timeout=EXIT_TIMEOUT_S * 3, check=True
    )
    assert (inside.stdout.strip(), outside.stdout.strip()) == ("refused", "mapped")
