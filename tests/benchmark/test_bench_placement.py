"""Placement and saturation in the benchmark harness, on tiny runs (no timed assertions)."""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.cli import main
from bench.harness.placement import CLIENT_CPU, EXECUTOR_CPU, placed, placed_all, trio_reference
from bench.harness.processes import BenchError, RunningExecutor, executor_spec
from bench.reports.output import ratio_lines
from bench.scenarios.saturation import PIPELINE_FRAMES

needs_two_cpus = pytest.mark.skipif(
    not {0, 1} <= os.sched_getaffinity(0), reason="the pinned placement uses CPUs 0 and 1"
)


@pytest.fixture
def out_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="bench-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _cpus_allowed(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


@needs_two_cpus
def test_pinned_spec_names_and_places_executor_and_clients() -> None:
    """``pinned`` suffixes the name and puts the executor and its clients on different CPUs."""
    spec = placed(executor_spec("trio"), "pinned")
    assert spec.name == "trio@pinned"
    assert (spec.cpus, spec.client_cpus) == (frozenset({EXECUTOR_CPU}), frozenset({CLIENT_CPU}))
    assert placed(executor_spec("trio"), "unpinned") == executor_spec("trio")
    names = [s.name for s in placed_all([executor_spec("trio")], ["unpinned", "pinned"])]
    assert names == ["trio", "trio@pinned"]
    with pytest.raises(BenchError, match="unknown placement"):
        placed(executor_spec("trio"), "sideways")


def test_ratios_are_taken_against_trio_in_the_same_placement() -> None:
    """A pinned executor's ratio divides by pinned trio's, an unpinned one's by unpinned trio's."""
    assert trio_reference("cmd:x@pinned") == "trio@pinned"
    medians = {
        ("trio", "blocking", "wake_recv"): 50.0,
        ("trio@pinned", "blocking", "wake_recv"): 20.0,
        ("cmd:x", "blocking", "wake_recv"): 10.0,
        ("cmd:x@pinned", "blocking", "wake_recv"): 10.0,
    }
    lines = ratio_lines(medians)
    assert any("cmd:x / trio " in line and "0.200x" in line for line in lines)
    assert any("cmd:x@pinned / trio@pinned" in line and "0.500x" in line for line in lines)


@needs_two_cpus
def test_pinned_executor_process_runs_on_its_cpu_only(out_dir: Path) -> None:
    """The pinned executor process is on the executor CPU from its first instruction."""
    spec = placed(executor_spec("asyncio"), "pinned")
    socket_path, db_path = str(out_dir / "x.sock"), str(out_dir / "t.db")
    with RunningExecutor(spec, socket_path, db_path) as executor:
        assert _cpus_allowed(executor._process.pid) == str(EXECUTOR_CPU)


@needs_two_cpus
def test_pinned_and_unpinned_runs_interleave_in_one_invocation(out_dir: Path) -> None:
    """Both placements of one executor run in every run of one invocation."""
    argv = ["--executors", "asyncio", "--clients", "blocking", "--iterations", "10"]
    argv += ["--warmup", "2", "--runs", "2", "--no-components", "--no-history"]
    assert main([*argv, "--out", str(out_dir / "r")]) == 0
    summary = _rows(out_dir / "r" / "summary.csv")
    assert {(r["run"], r["executor"]) for r in summary} == {
        (run, name) for run in ("1", "2") for name in ("asyncio", "asyncio@pinned")
    }


def test_saturation_writes_both_loads_and_accounts_for_every_ack(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--saturation: both loads per executor, 64-frame writes, rows + drops = acked in each."""
    argv = ["--saturation", "--executors", "trio", "--runs", "1", "--seconds", "0.3"]
    argv += ["--placement", "unpinned", "--out", str(out_dir / "r")]
    assert main(argv) == 0
    rows = _rows(out_dir / "r" / "saturation.csv")
    assert [(r["load"], r["connections"]) for r in rows] == [
        ("one-flat-out", "1"),
        ("four-at-40k", "4"),
    ]
    for row in rows:
        assert int(row["sent"]) > 0 and int(row["sent"]) % PIPELINE_FRAMES == 0
        assert int(row["acked"]) == int(row["sent"])
        assert int(row["rows_written"]) + int(row["drops"]) == int(row["acked"])
        assert 0 < float(row["wake_recv_p50_us"]) <= float(row["wake_recv_p99_us"])
    assert "saturation (64 frames per write)" in capsys.readouterr().out
