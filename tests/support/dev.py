"""``dev.py`` as a newcomer runs it: ``serve`` as a process, the other commands to their end.

Only meaningful inside one of dev.py's own environments (``.venv/``, ``.venv-3.X/``) installed
from this checkout's pyproject: elsewhere ``dev.py`` would build a new environment first. Tests
that run it skip otherwise, saying so.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.processes import Executor

ROOT = Path(__file__).resolve().parents[2]
DEV_SCRIPT = ROOT / "dev.py"

DEV_TIMEOUT_S = 120.0
"""Bound on one ``dev.py`` command run to its end (an interpreter start, a busy 2-core box)."""


def dev_module() -> ModuleType:
    """dev.py imported as a module (it is a script, not a package), to test its functions."""
    spec = importlib.util.spec_from_file_location("dev_script", DEV_SCRIPT)
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


def dev_environment() -> dict[str, str]:
    """This process's environment, pointing ``dev.py`` at the environment running the tests."""
    env = dict(os.environ)
    venv = Path(sys.prefix).resolve()
    if venv == ROOT / ".venv":
        env.pop("TRIO_EXECUTOR_PYTHON", None)
    else:
        env["TRIO_EXECUTOR_PYTHON"] = sys.executable
    return env


def dev_environment_is_current() -> bool:
    """Whether this interpreter is one of dev.py's environments, installed from this pyproject."""
    venv = Path(sys.prefix).resolve()
    if venv.parent != ROOT or not venv.name.startswith(".venv"):
        return False
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamp = venv / ".installed-pyproject"
    return stamp.exists() and stamp.read_text() == digest


def require_dev_environment() -> None:
    """Skip the calling test outside dev.py's up-to-date environment."""
    if not dev_environment_is_current():
        pytest.skip("not running in dev.py's up-to-date environment (run: python3 dev.py test)")


def copied_checkout(directory: Path) -> Path:
    """A checkout of dev.py's own in ``directory``: ``dev.py`` and ``pyproject.toml`` copied, the
    environment running the tests linked in. Its ``var/`` (the try-out's database) is its own, so
    a test never touches the real checkout's; the package it runs is this checkout's (installed
    editable). Returns the copied ``dev.py``."""
    require_dev_environment()
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy2(DEV_SCRIPT, directory / "dev.py")
    shutil.copy2(ROOT / "pyproject.toml", directory / "pyproject.toml")
    venv = Path(sys.prefix)
    (directory / venv.name).symlink_to(venv, target_is_directory=True)
    return directory / "dev.py"


def run_dev(
    *args: str | os.PathLike[str], cwd: Path, script: Path = DEV_SCRIPT
) -> subprocess.CompletedProcess[str]:
    """``python3 dev.py ARGS`` from ``cwd``, to its end."""
    return subprocess.run(
        [sys.executable, str(script), *(os.fspath(arg) for arg in args)],
        cwd=cwd,
        env=dev_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEV_TIMEOUT_S,
        check=False,
    )


class DevServe(Executor):
    """``python3 dev.py serve ARGS`` with stderr in a file (``env`` adds to the environment)."""

    def __init__(
        self,
        directory: Path,
        *args: str | os.PathLike[str],
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        script: Path = DEV_SCRIPT,
        name: str = "dev-serve",
    ) -> None:
        self.stderr_path = directory / f"{name}.stderr"
        command = [sys.executable, str(script), "serve", *(os.fspath(arg) for arg in args)]
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                cwd=cwd,
                env={**dev_environment(), **(env or {})},
            )
