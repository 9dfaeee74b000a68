"""``dev.py test --timing``: the suite as a benchmark (issue 33) prints its slowest tests, its wall
time, its CPU time and the machine's load, and keeps pytest's exit status."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.dev import dev_module, require_dev_environment, run_dev

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


def test_the_whole_suites_figures_are_set_beside_issue_33s_targets() -> None:
    """On an installed environment only the suite's wall time is judged (180 s); after this
    run's own install, the install plus the suite is judged as a fresh clone's (240 s), each
    "met" or "missed" by the figure, at the bound included."""
    targets_line = dev_module().targets_line
    assert targets_line(180.0, None) == ("dev.py: the whole suite: 180.0 s (target <= 180 s: met)")
    assert targets_line(180.04, None).endswith("(target <= 180 s: met)")
    assert targets_line(181.0, None).endswith("181.0 s (target <= 180 s: missed)")
    assert targets_line(170.0, 30.5) == (
        "dev.py: the whole suite: 170.0 s (target <= 180 s: met); with this run's install"
        " (30.5 s), a fresh clone's `dev.py test`: 200.5 s (target <= 240 s: met)"
    )
    assert targets_line(170.0, 75.0).endswith("245.0 s (target <= 240 s: missed)")


def test_a_timed_run_of_chosen_tests_is_not_judged_against_the_whole_suites_targets(
    short_dir: Path,
) -> None:
    """The targets are the whole suite's: a timed run of one file prints no targets line."""
    require_dev_environment()
    tests = short_dir / "test_timed.py"
    tests.write_text("def test_passes() -> None:\n    assert True\n")
    run = run_dev("test", "--timing", "-p", "no:cacheprovider", "-q", tests, cwd=short_dir)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "the whole suite" not in run.stdout
    assert TIMING_LINE.fullmatch(run.stdout.rstrip().splitlines()[-1]) is not None
