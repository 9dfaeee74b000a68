#!/usr/bin/env python3
"""Bootstrap and run trio-executor from a fresh checkout with nothing but Python 3.11+.

    python3 dev.py serve [ARGS...]   start the service (default socket and SQLite file; the
                                     in-process fake exchange unless --exchange is given)
    python3 dev.py stats [ARGS...]   `executor stats` on serve's SQLite file (var/telemetry.db)
    python3 dev.py orders [ARGS...]  `executor orders` on the same file: the recent orders
    python3 dev.py test [PYTEST ARGS...]   run the whole test suite
    python3 dev.py check             ruff + mypy --strict
    python3 dev.py bench [ARGS...]   run the benchmark (python -m bench)
    python3 dev.py setup             only create or refresh the environment

`serve`, `stats` and `orders` run in the caller's directory, so a relative path (`--telemetry-db
rel.db`, `--plot y.png`) means what it would to `executor` itself; `test`, `check` and `bench` run
in the checkout.

The first use creates `.venv/` beside this file and installs the package with its test, dev and
bench extras; later uses reinstall only when pyproject.toml changed.

TRIO_EXECUTOR_PYTHON=python3.13 picks another interpreter (a name on PATH, a path, or a pyenv
version's python3.X): its environment is `.venv-3.13/`, so each Python version keeps its own.
`serve` replaces this process with the executor (os.execv), so Ctrl-C and SIGTERM reach it directly;
before it does, it prints the `stats` and `orders` commands that read the file it writes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PYTHON_ENV = "TRIO_EXECUTOR_PYTHON"

DEFAULT_SOCKET = "/tmp/trio-executor/executor.sock"
DEFAULT_DB = str(ROOT / "var" / "telemetry.db")


def _interpreter_version(python: str) -> str | None:
    """``"3.13"`` for a working interpreter, None when it cannot be run."""
    try:
        result = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _pyenv_interpreter(name: str) -> str | None:
    """``python3.13`` from pyenv's newest installed 3.13.x, when pyenv has one (its shims only
    answer for the selected versions)."""
    pyenv = shutil.which("pyenv")
    if pyenv is None or not name.startswith("python3."):
        return None
    wanted = name.removeprefix("python")
    found = subprocess.run([pyenv, "latest", wanted], capture_output=True, text=True, check=False)
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
    if found.returncode != 0 or root.returncode != 0:
        return None
    candidate = Path(root.stdout.strip()) / "versions" / found.stdout.strip() / "bin" / name
    return str(candidate) if candidate.exists() else None


def _select_python() -> tuple[str, Path]:
    """The interpreter to build the environment with, and the environment's folder."""
    chosen = os.environ.get(PYTHON_ENV)
    if not chosen:
        if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may be run by an older python3
            sys.exit(f"trio-executor needs Python 3.11 or newer; this is {sys.version.split()[0]}")
        return sys.executable, ROOT / ".venv"
    version = _interpreter_version(chosen)
    if version is None:
        fallback = _pyenv_interpreter(chosen)
        version = _interpreter_version(fallback) if fallback else None
        if fallback is None or version is None:
            sys.exit(f"dev.py: {PYTHON_ENV}={chosen} is not a Python interpreter that runs here")
        chosen = fallback
    if tuple(int(part) for part in version.split(".")) < (3, 11):
        sys.exit(f"dev.py: trio-executor needs Python 3.11 or newer; {chosen} is {version}")
    return chosen, ROOT / f".venv-{version}"


def _ensure_venv() -> Path:
    """Create or refresh the environment; return its ``bin`` folder."""
    python, venv = _select_python()
    bin_dir = venv / "bin"
    stamp = venv / ".installed-pyproject"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and (bin_dir / "python").exists():
        return bin_dir
    if not (bin_dir / "python").exists():
        print(f"dev.py: creating {venv}", file=sys.stderr)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    print("dev.py: installing trio-executor with its test, dev and bench extras", file=sys.stderr)
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(
        [*pip, "--disable-pip-version-check", "-e", f"{ROOT}[test,dev,bench,plot]"], check=True
    )
    stamp.write_text(digest)
    return bin_dir


def _run(argv: list[str], cwd: Path = ROOT) -> int:
    return subprocess.run(argv, cwd=cwd).returncode


def _flag_value(args: list[str], flag: str) -> str | None:
    """The value of ``flag`` in ``args`` (``--flag V`` or ``--flag=V``), the last one winning."""
    value = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def _reading_commands(bin_dir: Path, database: str) -> str:
    """The lines ``dev.py serve`` prints: how to read what this executor records."""
    shown = Path(database).expanduser().absolute()
    executor = bin_dir / "executor"
    lines = ["dev.py: read what it records with (from this checkout, or anywhere):"]
    for command in ("stats", "orders"):
        dev = f"python3 dev.py {command}"
        if str(shown) != DEFAULT_DB:
            dev += f" --telemetry-db {shown}"
        lines.append(f"  {dev}")
        lines.append(f"  {executor} {command} --telemetry-db {shown}")
    return "\n".join(lines)


def main() -> int:
    command, *rest = sys.argv[1:] or ["help"]
    if command in {"help", "-h", "--help"}:
        print(__doc__)
        return 0
    python = str(_ensure_venv() / "python")
    if command == "setup":
        return 0  # the environment is ready; CI builds the other versions' ahead of their turn
    if command == "serve":
        defaults = [] if _flag_value(rest, "--socket") else ["--socket", DEFAULT_SOCKET]
        database = _flag_value(rest, "--telemetry-db")
        if database is None:
            defaults += ["--telemetry-db", DEFAULT_DB]
        print(_reading_commands(Path(python).parent, database or DEFAULT_DB), file=sys.stderr)
        if not any(arg == "--exchange" or arg.startswith("--exchange=") for arg in rest):
            defaults += ["--exchange", "fake"]  # a local try-out never needs an account
        # Become the executor: signals then reach it, not a parent that would die of them first.
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(python, [python, "-m", "executor", "serve", *defaults, *rest])
    if command in ("stats", "orders"):
        # The file dev.py serve writes, unless another is named.
        defaults = [] if _flag_value(rest, "--telemetry-db") else ["--telemetry-db", DEFAULT_DB]
        # From the caller's directory: relative paths (--telemetry-db, --plot) are theirs.
        return _run([python, "-m", "executor", command, *defaults, *rest], cwd=Path.cwd())
    if command == "test":
        return _run([python, "-m", "pytest", *rest])
    if command == "check":
        return _run([python, "-m", "ruff", "check", "."]) or _run(
            [python, "-m", "mypy", "--strict", "executor", "bench"]
        )
    if command == "bench":
        return _run([python, "-m", "bench", *rest])
    print(
        f"dev.py: unknown command {command!r}; try: serve, stats, orders, test, check, bench, "
        "setup",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
