"""The soak runs end to end for a few seconds, and reports a failure as one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.scenarios.soak import Soak

PROJECT = Path(__file__).resolve().parents[2]


def test_a_short_soak_passes_and_prints_its_figures() -> None:
    """Three cycles (one of them a SIGKILL) exit 0 and print every figure the report needs."""
    options = ["--minutes", "0.01", "--load-seconds", "0.5", "--held", "5", "--seed", "3"]
    result = subprocess.run(
        [sys.executable, "-m", "bench.scenarios.soak", *options],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = {line.split(":")[0]: line for line in result.stdout.splitlines() if ":" in line}
    for figure in ("frames sent", "acked", "fuzzed", "peers killed", "connections held"):
        assert int(lines[figure].split(":")[1]) > 0
    assert lines["restarts"].startswith("restarts: 2 (3 cycles")
    assert "rows lost (acked, missing after SIGKILL)" in lines
    assert int(lines["max executor RSS"].split()[3]) > 0
    assert lines["failures"] == "failures: 0"


def test_a_soak_that_cannot_start_the_executor_records_a_failure(short_dir: Path) -> None:
    """Negative twin: an unusable socket path is a recorded failure, not a quiet empty soak."""
    too_long = short_dir / ("d" * 120)
    too_long.mkdir()
    soak = Soak(too_long, connections=1, seed=1, load_s=0.1, held=0)
    figures = soak.run(deadline=time.monotonic())
    assert len(figures.failures) == 1
    assert "start failed" in figures.failures[0]
    assert figures.frames_sent == 0
