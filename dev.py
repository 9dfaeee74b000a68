#!/usr/bin/env python3
"""Bootstrap and run trio-executor from a fresh checkout with nothing but Python 3.11+.

    python3 dev.py serve [--fresh] [ARGS...]   start the service (default socket and SQLite file;
                                     a try-out on the in-process fake unless --exchange is given)
    python3 dev.py stats [ARGS...]   `executor stats` on the try-out's SQLite file (var/try-out.db)
    python3 dev.py orders [ARGS...]  `executor orders` on the same file: the recent orders
    python3 dev.py test [PYTEST ARGS...]   run the whole test suite (in TEST_WORKERS processes;
                                     with arguments, pytest runs exactly as they say)
    python3 dev.py test --timing [PYTEST ARGS...]   the same, then the 20 slowest tests, the
                                     wall time, the CPU time and the machine's load
    python3 dev.py check             ruff check + ruff format --check + mypy --strict + the
                                     documents' strict build
    python3 dev.py docs              build the documents (mkdocs build --strict) into site/
    python3 dev.py bench [ARGS...]   run the benchmark (python -m bench)
    python3 dev.py layout [--check]  write docs/design/layout.md from the packages' docstrings
                                     (--check: exit 1 if the committed file is stale)
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

A try-out is `serve` on the in-process fake (no `--exchange`, or `--exchange fake`): its orders
go to var/try-out.db (unless `--telemetry-db` names another), kept across runs like any other
database and never mixed with a real exchange's. `--fresh` (a try-out's only) moves it aside
first, as one unit with everything beside it (`-wal`, `-shm`, the intent journal `-intents`):
var/try-out.previous.db*. Without `--exchange` and `--env-file` a try-out also gets the try-out
risk limits (`TRYOUT_RISK_LIMITS`) for the KALSHI_RISK_* variables not set. Any other `serve`
(`--exchange auto` with a demo key, say) is the executor's own, on one stable database,
var/telemetry.db unless `--telemetry-db` names one: nothing is ever moved or reset for it.
`serve --help` only prints the help.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PYTHON_ENV = "TRIO_EXECUTOR_PYTHON"

DEFAULT_SOCKET = "/tmp/trio-executor/executor.sock"
DEFAULT_DB = str(ROOT / "var" / "telemetry.db")
"""A `serve` that is not a try-out (a real exchange, or none): one stable file across restarts."""
TRYOUT_DB = str(ROOT / "var" / "try-out.db")
"""A try-out's own file, kept across runs; `--fresh` moves it (and its companions) aside."""
FRESH_FLAG = "--fresh"

TEST_WORKERS = 3
"""Processes the whole suite runs in (pytest-xdist): its tests wait on subprocesses and sockets
more than they compute, so three on two cores took 305 s where one took 551 s (2026-12-02)."""


TIMING_FLAG = "--timing"
"""``dev.py test --timing``: the suite as a benchmark (issue 33), never a timed test."""

SLOWEST_SHOWN = 20
"""Tests named by ``--timing`` (pytest's ``--durations``): enough to see where the time goes."""

SUITE_TARGET_S = 180.0
"""Issue 33's target for the whole suite's wall time on an installed environment (2 cores)."""

FRESH_CLONE_TARGET_S = 240.0
"""Issue 33's target for a fresh clone's ``dev.py test``: the install and the whole suite."""


def targets_line(suite_s: float, install_s: float | None) -> str:
    """The whole suite's figures beside issue 33's targets; the fresh-clone figure only when this
    run installed the environment (``install_s``), as a fresh clone's first command does."""

    def verdict(figure_s: float, target_s: float) -> str:
        met = "met" if round(figure_s, 1) <= target_s else "missed"  # as printed
        return f"{figure_s:.1f} s (target <= {target_s:.0f} s: {met})"

    line = f"dev.py: the whole suite: {verdict(suite_s, SUITE_TARGET_S)}"
    if install_s is not None:
        line += (
            f"; with this run's install ({install_s:.1f} s), a fresh clone's "
            f"`dev.py test`: {verdict(install_s + suite_s, FRESH_CLONE_TARGET_S)}"
        )
    return line


def _timed(argv: list[str], whole_suite: bool = False, install_s: float | None = None) -> int:
    """Run ``argv`` (a pytest command) with its 20 slowest durations, then print one line with
    its wall time, CPU time (user + sys of every process it waited for: the workers and the
    executors the tests start) and the load average before and after (the machine is shared, so
    the CPU time is the steadier figure). For the whole suite, a second line sets its figures
    beside issue 33's targets (:func:`targets_line`)."""
    load_before = os.getloadavg()[0]
    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    status = _run([*argv, f"--durations={SLOWEST_SHOWN}"])
    wall_s = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    user_s = usage.ru_utime - usage_before.ru_utime
    sys_s = usage.ru_stime - usage_before.ru_stime
    print(
        f"dev.py: suite timing: wall {wall_s:.1f} s, CPU {user_s + sys_s:.1f} s "
        f"(user {user_s:.1f} s + sys {sys_s:.1f} s), load average {load_before:.2f} before "
        f"and {os.getloadavg()[0]:.2f} after on {os.cpu_count()} CPUs, pytest exit {status}",
        flush=True,
    )
    if whole_suite:
        print(targets_line(wall_s, install_s), flush=True)
    return status


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


def _ensure_venv() -> tuple[Path, bool]:
    """Create or refresh the environment; return its ``bin`` folder and whether this call
    installed it."""
    python, venv = _select_python()
    bin_dir = venv / "bin"
    stamp = venv / ".installed-pyproject"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest and (bin_dir / "python").exists():
        return bin_dir, False
    if not (bin_dir / "python").exists():
        print(f"dev.py: creating {venv}", file=sys.stderr)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    print("dev.py: installing trio-executor with its test, dev and bench extras", file=sys.stderr)
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run(
        [*pip, "--disable-pip-version-check", "-e", f"{ROOT}[test,dev,bench,plot]"], check=True
    )
    stamp.write_text(digest)
    return bin_dir, True


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
        if str(shown) != TRYOUT_DB:
            dev += f" --telemetry-db {shown}"
        lines.append(f"  {dev}")
        lines.append(f"  {executor} {command} --telemetry-db {shown}")
    return "\n".join(lines)


TRYOUT_RISK_LIMITS = {
    "KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR": "1000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_DAY": "10000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_TICKER_PER_DAY": "1000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_EVENT_PER_DAY": "1000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_CORRELATION_GROUP_PER_DAY": "1000",
    "KALSHI_RISK_MAX_NOTIONAL_PER_DAY_DOLLARS": "100000",
    "KALSHI_RISK_MAX_CONCURRENT_DISPATCHES": "32",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER": "100000",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_EVENT": "100000",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_CORRELATION_GROUP": "100000",
    "KALSHI_RISK_REFIRE_COOLDOWN_SECONDS": "0",
}
"""The risk gate's limits in a try-out (``serve`` choosing the in-process fake: no ``--exchange``,
no ``--env-file``), each only where its variable is unset. Production's defaults (10 attempts an
hour, 5 contracts a ticker, one attempt a minute per market and side, 2 orders in flight) refuse a
newcomer's second order on a market and everything after the tenth, for an hour. These let a
person's hundreds of wakes reach the fake (whose $100 account still bounds what sizing buys);
the gate's other checks (the exchange index, prices, volume) stay. Guesses, sized to never be met
by hand. The executor's own defaults are unchanged."""


def _serve(python: str, rest: list[str]) -> None:
    """Become ``executor serve`` with dev.py's defaults; a try-out gets its own database and
    try-out limits (said on stderr first). ``--help`` changes nothing on disk."""
    fresh = FRESH_FLAG in rest
    rest = [arg for arg in rest if arg != FRESH_FLAG]
    if any(arg in ("-h", "--help") for arg in rest):
        os.execv(
            python, [python, "-m", "executor", "serve", *rest]
        )  # only the help, no side effect
    chosen_fake = not any(arg == "--exchange" or arg.startswith("--exchange=") for arg in rest)
    tryout = chosen_fake or _flag_value(rest, "--exchange") == "fake"
    if fresh and not tryout:
        sys.exit(
            f"dev.py: {FRESH_FLAG} starts a try-out's database afresh; with a real exchange the "
            "database is the executor's own and is never moved (name another with --telemetry-db)"
        )
    defaults = [] if _flag_value(rest, "--socket") else ["--socket", DEFAULT_SOCKET]
    database = _flag_value(rest, "--telemetry-db")
    if database is None:
        database = TRYOUT_DB if tryout else DEFAULT_DB
        defaults += ["--telemetry-db", database]
    notes = []
    if fresh:
        notes.append(_fresh_database(Path(database)))
    if chosen_fake:
        defaults += ["--exchange", "fake"]  # a local try-out never needs an account
    if chosen_fake and _flag_value(rest, "--env-file") is None:
        chosen = {
            name: value for name, value in TRYOUT_RISK_LIMITS.items() if name not in os.environ
        }
        os.environ.update(chosen)
        if chosen:
            notes.append(
                "dev.py: try-out risk limits (production keeps its defaults, "
                "docs/operations/configuration.md; "
                "set a KALSHI_RISK_* variable to choose one): "
                + " ".join(f"{name.removeprefix('KALSHI_RISK_')}={chosen[name]}" for name in chosen)
            )
    print(
        "\n".join([*notes, _reading_commands(Path(python).parent, database)]),
        file=sys.stderr,
    )
    # Become the executor: signals then reach it, not a parent that would die of them first.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(python, [python, "-m", "executor", "serve", *defaults, *rest])


def _database_unit(path: Path) -> list[Path]:
    """``path`` and every file beside it that belongs to it (``-wal``, ``-shm``, the intent
    journal ``-intents``, ``-journal``: all named ``path`` + a suffix), those that exist."""
    if not path.parent.is_dir():
        return []
    return sorted(
        entry
        for entry in path.parent.iterdir()
        if entry.name == path.name or entry.name.startswith(path.name + "-")
    )


def _fresh_database(path: Path) -> str:
    """Move the try-out's database at ``path`` aside to ``*.previous.db``, as one unit with its
    companions (an earlier previous unit is removed first, whole), so this run starts with an
    empty audit trail, as its fake starts with a fresh account. Returns the line to print.

    Exits with one line when an executor holds the file: moving a database in use would split it
    from its journal."""
    unit = _database_unit(path)
    if not unit:
        return f"dev.py: {FRESH_FLAG}: no {path} yet, this run creates it"
    if path.exists():
        try:
            with path.open("rb") as held:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(f"dev.py: {FRESH_FLAG}: an executor is using {path}; stop it first")
    previous = path.with_name(path.stem + ".previous" + path.suffix)
    for stale in _database_unit(previous):
        stale.unlink()
    for source in unit:
        os.replace(source, previous.with_name(previous.name + source.name[len(path.name) :]))
    return f"dev.py: a fresh {path} for this run (the last one, with its journal: {previous})"


SITE = ROOT / "site"
"""Where ``dev.py docs`` builds the documents (.gitignore keeps it out of the repository)."""


def _build_docs(python: str, *rest: str) -> int:
    """The documents as a site, strictly: a broken link or anchor, or a page missing from the
    nav, fails the build (mkdocs.yml says so too)."""
    return _run([python, "-m", "mkdocs", "build", "--strict", "--site-dir", str(SITE), *rest])


def main() -> int:
    command, *rest = sys.argv[1:] or ["help"]
    if command in {"help", "-h", "--help"}:
        print(__doc__)
        return 0
    if command == "layout":
        # Reads docstrings with ast only: no environment needed.
        from tools.layout import main as layout_main

        return layout_main(rest)
    started = time.monotonic()
    bin_dir, installed = _ensure_venv()
    install_s = time.monotonic() - started if installed else None
    python = str(bin_dir / "python")
    if command == "setup":
        return 0  # the environment is ready; CI builds the other versions' ahead of their turn
    if command == "serve":
        _serve(python, rest)
    if command in ("stats", "orders"):
        # The try-out's file, unless another is named (serve prints the command for its own).
        defaults = [] if _flag_value(rest, "--telemetry-db") else ["--telemetry-db", TRYOUT_DB]
        # From the caller's directory: relative paths (--telemetry-db, --plot) are theirs.
        return _run([python, "-m", "executor", command, *defaults, *rest], cwd=Path.cwd())
    if command == "test":
        # The whole suite (no arguments) over TEST_WORKERS processes; with arguments, as given.
        timing = rest[:1] == [TIMING_FLAG]
        pytest_args = rest[1:] if timing else rest
        workers = [] if pytest_args else ["-n", str(TEST_WORKERS)]
        argv = [python, "-m", "pytest", *workers, *pytest_args]
        if timing:
            return _timed(argv, whole_suite=not pytest_args, install_s=install_s)
        return _run(argv)
    if command == "check":
        return (
            _run([python, "-m", "ruff", "check", "."])
            or _run([python, "-m", "ruff", "format", "--check", "."])
            or _run([python, "-m", "mypy", "--strict", "executor", "bench"])
            or _build_docs(python)
        )
    if command == "docs":
        return _build_docs(python, *rest)
    if command == "bench":
        return _run([python, "-m", "bench", *rest])
    print(
        f"dev.py: unknown command {command!r}; try: serve, stats, orders, test, check, docs, "
        "bench, layout, setup",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
