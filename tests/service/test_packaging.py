"""The installed package: only ``executor`` lands in site-packages, the benchmark stays out."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BUILD_TIMEOUT_S = 90.0
"""Longest a wheel build may take (a few seconds idle; a loaded 2-core box is slower)."""

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "executor", "bench")
"""What the build reads; copied so the build leaves the checkout untouched (no build/ folder)."""


def _top_level_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name.split("/", 1)[0] for name in archive.namelist()}


def test_wheel_installs_only_the_executor_package(tmp_path: Path) -> None:
    """The wheel holds the ``executor`` package and its metadata, nothing else (no ``bench``)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    out = tmp_path / "dist"
    build = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"),
            *("--no-index", "--quiet", "--wheel-dir", str(out), str(source)),
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = out.glob("*.whl")
    names = _top_level_names(wheel)
    packages = {name for name in names if not name.endswith((".dist-info", ".data"))}
    assert packages == {"executor"}
    assert "executor/cli.py" in zipfile.ZipFile(wheel).namelist()


def test_the_benchmark_runs_from_a_checkout() -> None:
    """``python -m bench --help`` works from the repository root although bench is not installed."""
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "--executors" in run.stdout
