#!/usr/bin/env python3
"""Bootstrap and run trio-executor from a fresh checkout with nothing but Python 3.11+.

    python3 dev.py serve [ARGS...]   start the service (default socket and SQLite file; the
                                     in-process fake exchange unless --exchange is given)
    python3 dev.py test [PYTEST ARGS...]   run the whole test suite
    python3 dev.py check             ruff + mypy --strict
    python3 dev.py bench [ARGS...]   run the benchmark (python -m bench)

The first use creates `.venv/` beside this file and installs the package with its test, dev and
bench extras; later uses reinstall only when pyproject.toml changed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
STAMP = VENV / ".installed-pyproject"

DEFAULT_SOCKET = "/tmp/trio-executor/executor.sock"
DEFAULT_DB = str(ROOT / "var" / "telemetry.db")


def _ensure_venv() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may be run by an older python3
        sys.exit(f"trio-executor needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest and (BIN / "python").exists():
        return
    if not (BIN / "python").exists():
        print(f"dev.py: creating {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("dev.py: installing trio-executor with its test, dev and bench extras", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-e", f"{ROOT}[test,dev,bench]"], check=True)
    STAMP.write_text(digest)


def _run(argv: list[str]) -> int:
    return subprocess.run(argv, cwd=ROOT).returncode


def main() -> int:
    command, *rest = sys.argv[1:] or ["help"]
    if command in {"help", "-h", "--help"}:
        print(__doc__)
        return 0
    _ensure_venv()
    python = str(BIN / "python")
    if command == "serve":
        defaults = [] if "--socket" in rest else ["--socket", DEFAULT_SOCKET]
        if "--telemetry-db" not in rest:
            defaults += ["--telemetry-db", DEFAULT_DB]
        if not any(arg == "--exchange" or arg.startswith("--exchange=") for arg in rest):
            defaults += ["--exchange", "fake"]  # a local try-out never needs an account
        return _run([python, "-m", "executor", "serve", *defaults, *rest])
    if command == "test":
        return _run([python, "-m", "pytest", *rest])
    if command == "check":
        return _run([python, "-m", "ruff", "check", "."]) or _run(
            [python, "-m", "mypy", "--strict", "executor", "bench"]
        )
    if command == "bench":
        return _run([python, "-m", "bench", *rest])
    print(f"dev.py: unknown command {command!r}; try: serve, test, check, bench", file=sys.stderr)
    return 2


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
