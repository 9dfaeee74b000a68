"""``executor serve --cpu``: the loop thread on its CPU, the other threads and workers off it.

Affinities are read back from ``/proc/PID/task/TID/status`` (``Cpus_allowed_list``) of a real
executor process, so the test sees what the kernel applied, not what the code meant to apply.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.runtime.placement import Placement, PlacementError, allowed_cpus, parse_cpus
from executor.wire.protocol import WakeMessage
from tests.support.inprocess import make_wake
from tests.support.processes import (
    Spawner,
    assert_one_line_failure,
    exit_counters,
    request_all,
)

ALLOWED = allowed_cpus()
LOOP_CPU = max(ALLOWED)
needs_two_cpus = pytest.mark.skipif(
    len(ALLOWED) < 2, reason="keeping threads off the loop's CPU needs a second CPU"
)


def cpus_of(path: Path) -> frozenset[int]:
    """The CPUs a ``/proc/.../status`` file allows (``Cpus_allowed_list``, ranges expanded)."""
    for line in path.read_text(encoding="ascii").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            cpus: set[int] = set()
            for part in line.split(":", 1)[1].strip().split(","):
                low, _, high = part.partition("-")
                cpus.update(range(int(low), int(high or low) + 1))
            return frozenset(cpus)
    raise AssertionError(f"no Cpus_allowed_list in {path}")


def thread_cpus(pid: int) -> dict[int, frozenset[int]]:
    """Every thread of ``pid`` and the CPUs it may run on."""
    tasks = Path(f"/proc/{pid}/task")
    return {int(tid.name): cpus_of(tid / "status") for tid in tasks.iterdir()}


def child_pids(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    return children


def test_parse_cpus_accepts_one_cpu_and_a_list() -> None:
    """``N`` and ``N,M`` name those CPUs when this process may use them."""
    allowed = frozenset({0, 1, 2})
    assert parse_cpus("1", allowed) == {1}
    assert parse_cpus("0, 2", allowed) == {0, 2}


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-1", {0, 1}),
        ("0-2", {0, 1, 2}),
        ("1-1", {1}),
        ("0,2-3", {0, 2, 3}),
        ("0-3:2", {0, 2}),
        ("0 2", {0, 2}),
        ("0-1 3", {0, 1, 3}),
    ],
)
def test_parse_cpus_accepts_ranges_as_taskset_and_systemd_do(text: str, cpus: set[int]) -> None:
    """Ranges (``0-1``), strides (``0-3:2``) and space-separated items name the CPUs that
    ``taskset -c`` and systemd's ``CPUAffinity=`` would."""
    assert parse_cpus(text, frozenset({0, 1, 2, 3})) == cpus


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "expected a CPU number"),
        ("one", "expected a CPU number"),
        ("-1", "expected a CPU number"),
        ("1,", "expected a CPU number"),
        ("1.5", "expected a CPU number"),
        ("2-1", "expected a CPU number"),
        ("0-", "expected a CPU number"),
        ("-", "expected a CPU number"),
        ("0-3:0", "expected a CPU number"),
        ("0--1", "expected a CPU number"),
        ("0-4", "CPU 3,4 is not available"),
        ("3", "CPU 3 is not available to this process (allowed: 0,1,2)"),
        ("0,7,9", "CPU 7,9 is not available"),
    ],
)
def test_parse_cpus_refuses_what_cannot_be_used(text: str, needle: str) -> None:
    """Malformed values and CPUs outside the process's affinity are refused, saying which."""
    with pytest.raises(PlacementError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_cpus(text, frozenset({0, 1, 2}))


def test_placement_gives_the_rest_the_other_cpus() -> None:
    """The others get every allowed CPU but the loop's; with none left they share the loop's."""
    split = Placement.for_loop(frozenset({1}), frozenset({0, 1, 2}))
    assert (split.other_cpus, split.shared) == (frozenset({0, 2}), False)
    alone = Placement.for_loop(frozenset({0}), frozenset({0}))
    assert (alone.other_cpus, alone.shared) == (frozenset({0}), True)


def test_cpu_outside_the_affinity_is_a_one_line_configuration_error(spawner: Spawner) -> None:
    """``--cpu`` naming a CPU this process cannot use: exit 2, one line, nothing served."""
    missing = max(ALLOWED) + 1
    run = spawner.run("serve", "--socket", spawner.directory / "x.sock", "--cpu", str(missing))
    assert_one_line_failure(run, "--cpu", f"CPU {missing} is not available")
    assert run.returncode == 2
    assert not (spawner.directory / "x.sock").exists()


def test_malformed_cpu_is_a_one_line_configuration_error(spawner: Spawner) -> None:
    """``--cpu one``: exit 2, one line naming the expected form."""
    run = spawner.run("serve", "--socket", spawner.directory / "x.sock", "--cpu", "one")
    assert_one_line_failure(run, "--cpu", "expected a CPU number")
    assert run.returncode == 2


@needs_two_cpus
def test_loop_thread_pinned_and_other_threads_off_it(spawner: Spawner) -> None:
    """With ``--cpu N`` the loop thread may run on N only; every other thread never on N."""
    socket_path = spawner.directory / "x.sock"
    executor = spawner.serve(socket_path, spawner.directory / "t.db", "--cpu", str(LOOP_CPU))
    wakes: list[WakeMessage] = [make_wake(f"placed{i}") for i in range(3)]
    assert [ack.status for ack in request_all(socket_path, wakes)] == ["accepted"] * 3
    threads = thread_cpus(executor.pid)
    # trio.run runs on the main thread, whose thread id is the process id.
    assert threads.pop(executor.pid) == {LOOP_CPU}
    assert len(threads) >= 2, "expected the log writer and a telemetry worker thread"
    assert all(cpus == ALLOWED - {LOOP_CPU} for cpus in threads.values()), threads
    executor.signal(15)
    assert executor.wait() == 0
    _, telemetry = exit_counters(executor.stderr_lines())
    assert telemetry["rows_written"] == 3


@needs_two_cpus
def test_signing_worker_process_is_off_the_loop_cpu(spawner: Spawner) -> None:
    """With an exchange, the processes the executor starts (signing worker) avoid the loop CPU."""
    socket_path = spawner.directory / "x.sock"
    executor = spawner.serve(
        socket_path, spawner.directory / "t.db", "--cpu", str(LOOP_CPU), "--exchange", "fake"
    )
    deadline = time.monotonic() + 15.0
    while not (children := child_pids(executor.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children, "the signing worker was started at start-up"
    for child in children:
        assert set(thread_cpus(child).values()) == {ALLOWED - {LOOP_CPU}}
    assert thread_cpus(executor.pid)[executor.pid] == {LOOP_CPU}
    executor.signal(15)
    assert executor.wait() == 0


@needs_two_cpus
def test_threads_started_after_placement_leave_the_loop_cpu() -> None:
    """A thread started after ``apply_placement`` runs its first line already off the loop CPU."""
    script = (
        "import os, threading\n"
        "from executor.runtime.placement import Placement, allowed_cpus, apply_placement\n"
        f"apply_placement(Placement.for_loop(frozenset({{{LOOP_CPU}}}), allowed_cpus()))\n"
        "seen = []\n"
        "thread = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
        "thread.start(); thread.join()\n"
        "print(sorted(os.sched_getaffinity(0)), seen[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=True
    )
    loop, thread = done.stdout.strip().split("] [")
    assert loop + "]" == str([LOOP_CPU])
    assert "[" + thread == str(sorted(ALLOWED - {LOOP_CPU}))
    assert os.sched_getaffinity(0) == ALLOWED  # the test process itself was never pinned
