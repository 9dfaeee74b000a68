"""Contention in the benchmark harness: background load, the reference poller's drops, the
saturation rate (tiny runs, no timed assertions)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import bench.harness.cli
from bench.clients.reference_burst import QUEUE_MAXSIZE, SHADOW_QUEUE_LIMIT, accepts
from bench.harness.background import BackgroundLoad
from bench.harness.cli import main
from bench.harness.processes import ExecutorSpec
from bench.scenarios.throughput import ThroughputResult

REPO = Path(__file__).resolve().parents[2]
EXIT_DEADLINE_S = 60.0
"""Hard bound on waiting for a process to go (s): a guard against a hang, never a measurement."""


@pytest.fixture
def out_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="bench-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + EXIT_DEADLINE_S
    while not _gone(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.05)


def _spinner_children() -> list[int]:
    """Processes whose parent is this one and that run ``bench.harness.background``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii")
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        ours = parent == os.getpid() and b"bench.harness.background" in command
        if ours and not _gone(int(entry.name)):
            found.append(int(entry.name))
    return found


def _spinners_once_started(count: int) -> list[int]:
    """``_spinner_children()`` once it finds ``count`` of them, or what it finds at the deadline.

    A child ``Popen`` has returned for may still be inside its ``execve`` (Python 3.13 may start it
    with ``posix_spawn``): until the kernel has set up its arguments, its ``cmdline`` reads empty
    and the child is not recognised yet. Seen once in CI under the parallel suite.
    """
    deadline = time.monotonic() + EXIT_DEADLINE_S
    while len(found := _spinner_children()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def test_background_load_runs_its_spinners_only_inside_the_block() -> None:
    """``BackgroundLoad(2)`` has two spinners running inside its block and none after it."""
    with BackgroundLoad(2) as load:
        assert len(load.pids) == 2
        assert sorted(_spinners_once_started(2)) == sorted(load.pids)
        assert load.description.startswith("2 spinning processes")
        pids = load.pids
    for pid in pids:
        _wait_gone(pid)
    assert _spinner_children() == []


def test_no_background_load_starts_nothing() -> None:
    """The default, 0, starts no process and is described as ``none``."""
    with BackgroundLoad(0) as load:
        assert load.pids == [] and _spinner_children() == []
        assert load.description == "none"


def test_a_spinner_whose_harness_died_exits_by_itself() -> None:
    """A spinner left behind by a harness that died without stopping it exits on its own."""
    starter = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys\n"
            "spinner = [sys.executable, '-m', 'bench.harness.background', str(os.getpid())]\n"
            "print(subprocess.Popen(spinner).pid)\n",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=EXIT_DEADLINE_S,
    )
    _wait_gone(int(starter.stdout.strip()))


def test_saturation_runs_under_the_background_load_and_names_it(
    out_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--background-load 2: two spinners run during the runs; output and machine.txt name them."""
    seen: list[int] = []
    spinning = 2  # the spinners the next invocation runs

    def fake_saturation(
        executors: Sequence[ExecutorSpec],
        runs: int,
        seconds: float,
        progress: object,
        rate: float,
    ) -> list[tuple[int, str, ThroughputResult]]:
        seen.extend(_spinners_once_started(spinning))
        return []

    monkeypatch.setattr(bench.harness.cli, "run_saturation", fake_saturation)
    argv = ["--saturation", "--executors", "trio", "--runs", "1", "--placement", "unpinned"]
    assert main([*argv, "--background-load", "2", "--out", str(out_dir / "r")]) == 0
    assert len(seen) == 2
    machine = (out_dir / "r" / "machine.txt").read_text(encoding="utf-8")
    assert "background_load: 2 spinning processes" in machine
    assert "background load: 2 spinning processes" in capsys.readouterr().out
    assert _spinner_children() == []
    spinning = 0
    assert main([*argv, "--out", str(out_dir / "q")]) == 0
    assert "background_load: none" in (out_dir / "q" / "machine.txt").read_text(encoding="utf-8")


def test_saturation_rate_sets_the_four_connection_load(out_dir: Path) -> None:
    """--saturation-rate 2000: the four-connection load offers 2,000 frames/s and is named so."""
    argv = ["--saturation", "--executors", "trio", "--runs", "1", "--seconds", "0.3"]
    argv += ["--placement", "unpinned", "--saturation-rate", "2000", "--out", str(out_dir / "r")]
    assert main(argv) == 0
    rows = _rows(out_dir / "r" / "saturation.csv")
    assert [(r["load"], r["connections"], r["offered_per_s"]) for r in rows] == [
        ("one-flat-out", "1", "0.0"),
        ("four-at-2k", "4", "2000.0"),
    ]
    for row in rows:
        assert int(row["rows_written"]) + int(row["drops"]) == int(row["acked"])


def test_reference_policy_drops_a_shadow_past_a_quarter_and_any_wake_when_full() -> None:
    """A shadow wake finding 250 queued is dropped, 249 not; any wake finding 1,000 is dropped."""
    assert (QUEUE_MAXSIZE, SHADOW_QUEUE_LIMIT) == (1000, 250)
    assert accepts(SHADOW_QUEUE_LIMIT - 1, dry_run=True)
    assert not accepts(SHADOW_QUEUE_LIMIT, dry_run=True)
    assert accepts(QUEUE_MAXSIZE - 1, dry_run=False)
    assert not accepts(QUEUE_MAXSIZE, dry_run=False)


def _late_reader_executor(directory: Path) -> str:
    """A ``cmd:`` executor: the baseline, but each connection waits 2 s before its first read."""
    script = directory / "late_reader.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            sys.path.insert(0, {str(REPO)!r})
            import bench.baselines.executor as baseline

            original = baseline.BaselineExecutor._frames

            async def late(self, reader, writer):
                await asyncio.sleep(2.0)
                await original(self, reader, writer)

            baseline.BaselineExecutor._frames = late
            sys.exit(baseline.main(sys.argv[1:]))
            """
        ),
        encoding="utf-8",
    )
    return f"cmd:{sys.executable} {script}"


def test_reference_client_counts_wakes_its_queue_lost_and_the_run_still_completes(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against an executor that reads late, the reference client loses wakes, counts them in
    burst.csv and the printed line, and the run completes on the delivered wakes' rows."""
    argv = ["--executors", _late_reader_executor(out_dir), "--clients", "reference-asyncio"]
    argv += ["--iterations", "2000", "--warmup", "200", "--runs", "1", "--no-components"]
    argv += ["--no-history", "--placement", "unpinned", "--out", str(out_dir / "r")]
    assert main(argv) == 0
    (burst,) = _rows(out_dir / "r" / "burst.csv")
    lost = int(burst["lost"])
    assert lost > 0
    assert int(burst["n"]) == 2200 - lost - 200
    summary = _rows(out_dir / "r" / "summary.csv")
    assert {(r["span"], r["n"]) for r in summary} == {
        ("wake_recv", str(2000 - lost)),
        ("wake_send", str(2000 - lost)),
    }
    assert f"lost {lost} of 2200 wakes offered" in capsys.readouterr().out


def test_reference_client_accounts_for_every_wake_offered(out_dir: Path) -> None:
    """Against the baseline reading at once, every offered wake is delivered or counted lost."""
    argv = ["--executors", "asyncio", "--clients", "reference-asyncio", "--runs", "1"]
    argv += ["--iterations", "2000", "--warmup", "200", "--no-components", "--no-history"]
    argv += ["--placement", "unpinned", "--out", str(out_dir / "r")]
    assert main(argv) == 0
    (burst,) = _rows(out_dir / "r" / "burst.csv")
    assert int(burst["n"]) + 200 + int(burst["lost"]) == 2200
