"""``dev.py test --timing``: the suite as a benchmark (issue 33) prints its slowest tests, its wall
time, its CPU time and the machine's load, and keeps pytest's exit status."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.dev import require_dev_environment, run_dev

TIMING_LINE = re.compile(
    r"^dev\.py: suite timing: wall (\d+\.\d) s, CPU (\d+\.\d) s "
    r"\(user (\d+\.\d) s \+ sys (\d+\.\d) s\), load average \d+\.\d\d before and \d+\.\d\d after "
    r"on \d+ CPUs, pytest exit (\d+)$",
)


def test_timing_prints_the_slowest_tests_and_the_times_and_keeps_the_exit_status(
    short_dir: Path,
) -> None:
    """A timed run of one passing and one failing test lists both among the slowest durations,
    ends with the timing line (CPU = user + sys, both counted), and exits as pytest did (1)."""
    require_dev_environment()
    tests = short_dir / "test_timed.py"
    tests.write_text(
        "def test_passes() -> None:\n    assert True\n\n\n"
        "def test_fails() -> None:\n    assert False\n"
    )
    run = run_dev("test", "--timing", "-p", "no:cacheprovider", "-q", tests, cwd=short_dir)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "slowest 20 durations" in run.stdout
    assert "1 failed, 1 passed" in run.stdout
    timing = TIMING_LINE.fullmatch(run.stdout.rstrip().splitlines()[-1])
    assert timing is not None, run.stdout
    wall_s, cpu_s, user_s, sys_s, status = (float(figure) for figure in timing.groups())
    assert wall_s > 0 and user_s > 0
    assert abs(cpu_s - (user_s + sys_s)) <= 0.11  # each figure is rounded to 0.1 s
    assert status == 1
