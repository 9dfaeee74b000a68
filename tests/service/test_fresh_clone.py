"""The suite stands on the checkout alone: nothing beside it, nothing from the caller's shell.

A fresh clone has no ``../shared`` beside it and a newcomer's shell may hold ``KALSHI_*``
variables of its own; neither may change a test's outcome. CI also runs one Python version's
whole suite from a clone in an empty temporary folder (``.ci/run``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SUITE_TIMEOUT_S = 300.0
"""Bound on the few tests run in a child pytest here (seconds), on a loaded machine."""

EXECUTOR_TESTS = [
    "tests/service/test_first_use.py::test_socket_under_proc_says_what_is_wrong",
    "tests/service/test_first_use.py::test_database_under_a_regular_file_says_what_is_wrong",
]
"""Tests whose executors must print exactly one line: an unknown variable's warning breaks them."""


REFERENCE_GOLDEN = "TRIO_EXECUTOR_REFERENCE_GOLDEN"
"""Where the golden cross-check finds the reference's output; never passed to a child here."""


def _pytest(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {name: value for name, value in os.environ.items() if name != REFERENCE_GOLDEN}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_S,
        check=False,
    )


def test_no_kalshi_variable_of_the_callers_shell_reaches_the_tests() -> None:
    """Run with stray KALSHI_* variables in the environment (a name nothing reads, and a real
    exchange's key id), tests that start executors and count their stderr lines still pass."""
    ran = _pytest(
        ROOT,
        *EXECUTOR_TESTS,
        KALSHI_OPENAPI_DIR="/nowhere",
        KALSHI_API_KEY_ID="a-real-account",
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert not any(name.startswith("KALSHI_") for name in os.environ)  # this run's too


def _tracked_files() -> list[str]:
    """What a clone of the working tree holds: tracked files and new ones not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [name for name in listed.stdout.split("\0") if name and (ROOT / name).is_file()]


def test_a_copy_with_nothing_beside_it_validates_the_fake(short_dir: Path) -> None:
    """The tests that once read ``../shared`` (the published API's schema files) pass in a copy of
    the working tree with nothing beside it, and the golden cross-check with the reference skips,
    naming the repository its output comes from."""
    clone = short_dir / "clone"
    for name in _tracked_files():
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    assert not (clone.parent / "shared").exists()
    ran = _pytest(
        clone,
        "-rs",
        "tests/fake/test_published_api.py",
        "tests/fake/test_vendored_api.py",
        "tests/wire/test_conformance.py",
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "reference golden output not given" in ran.stdout
    assert "anaborne/prediction-market-infra" in ran.stdout
    assert " passed" in ran.stdout and " failed" not in ran.stdout


def test_the_reference_cross_check_reads_nothing_beside_the_checkout() -> None:
    """Run in the checkout itself without TRIO_EXECUTOR_REFERENCE_GOLDEN, the golden cross-check
    is skipped, naming the reference's repository, even where a copy of the reference's output
    lies beside the checkout (it once read ``../shared`` by default)."""
    ran = _pytest(ROOT, "-rs", "tests/wire/test_conformance.py")
    # A module skipped whole leaves nothing collected: pytest's exit status 5.
    assert ran.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, ran.stdout[-3000:] + ran.stderr
    assert "1 skipped" in ran.stdout and " passed" not in ran.stdout, ran.stdout[-3000:]
    assert "anaborne/prediction-market-infra" in ran.stdout
