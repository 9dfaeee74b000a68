"""One exit-status rule for ``executor serve``: configuration and usage errors 2, runtime ones 1.

Every configuration error the executor can meet before it serves is run as a real process: each
must exit 2 with one line on stderr and no traceback, leaving no socket behind. The runtime
failures (another executor, a busy port, an unusable database, an exchange that cannot be
reached) exit 1 the same way. The table these cases follow is "Exit status" in
docs/operations/configuration.md.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from executor.fake.exchange import FakeCredentials
from tests.support.processes import EXIT_TIMEOUT_S, assert_one_line_failure


@dataclass
class Case:
    """One bad start: extra flags, extra environment, and what the line must say."""

    args: list[str]
    env: dict[str, str]
    needle: str


@dataclass
class Place:
    """The files a case may point at, made fresh for each test."""

    root: Path
    socket: Path
    key: Path
    ca: Path


@pytest.fixture
def place(short_dir: Path, fake_credentials: FakeCredentials) -> Iterator[Place]:
    """A socket path, a usable key and CA, all under a short directory."""
    key, ca = short_dir / "key.pem", short_dir / "ca.pem"
    key.write_bytes(fake_credentials.private_key_path.read_bytes())
    key.chmod(0o600)  # a key others can read is refused
    ca.write_bytes(fake_credentials.ca_file.read_bytes())
    yield Place(short_dir, short_dir / "x.sock", key, ca)


def run_serve(place: Place, case: Case) -> subprocess.CompletedProcess[str]:
    """``executor serve --socket ... --telemetry-db ...`` with the case's flags and variables."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KALSHI_")}
    environment["XDG_STATE_HOME"] = str(place.root / "state")
    environment.update(case.env)
    return subprocess.run(
        [
            *(sys.executable, "-m", "executor", "serve", "--socket", str(place.socket)),
            *("--telemetry-db", str(place.root / "t.db"), *case.args),
        ],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S * 3,
        check=False,
    )


def _real(place: Place, **extra: str) -> dict[str, str]:
    """The variables of a real (demo) exchange with the usable key."""
    return {
        "KALSHI_API_KEY_ID": "key-1",
        "KALSHI_PRIVATE_KEY_PATH": str(place.key),
        "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
        **extra,
    }


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


CONFIGURATION_ERRORS: dict[str, Callable[[Place], Case]] = {
    "unknown flag": lambda p: Case(["--bogus"], {}, "unrecognized arguments"),
    "malformed flag value": lambda p: Case(["--grace", "soon"], {}, "--grace"),
    "bad --metrics": lambda p: Case(["--metrics", "host:port"], {}, "--metrics"),
    "socket names a directory": lambda p: Case([], {}, "names a directory"),
    "socket path too long": lambda p: Case([], {}, "AF_UNIX allows 107"),
    "bad KALSHI_ENVIRONMENT": lambda p: Case([], {"KALSHI_ENVIRONMENT": "staging"}, "staging"),
    "prod without permission": lambda p: Case(
        [], _real(p, KALSHI_ENVIRONMENT="prod"), "KALSHI_ALLOW_PRODUCTION_ORDERS"
    ),
    "key id without a key": lambda p: Case(
        [], {"KALSHI_API_KEY_ID": "key-1"}, "KALSHI_PRIVATE_KEY_PATH is not"
    ),
    "missing key file": lambda p: Case(
        [], _real(p, KALSHI_PRIVATE_KEY_PATH=str(p.root / "none.pem")), "no such file"
    ),
    "key path is a directory": lambda p: Case(
        [], _real(p, KALSHI_PRIVATE_KEY_PATH=str(p.root)), "not a regular file"
    ),
    "malformed key file": lambda p: Case(
        [], _real(p, KALSHI_PRIVATE_KEY_PATH=_write(p.root / "bad.pem", "junk")), "not a PEM"
    ),
    "no allowed exchange indexes": lambda p: Case(
        [], _real(p, KALSHI_ALLOWED_EXCHANGE_INDEXES=""), "KALSHI_ALLOWED_EXCHANGE_INDEXES"
    ),
    "malformed number": lambda p: Case([], {"KALSHI_KELLY_FRACTION": "lots"}, "KALSHI_KELLY"),
    "malformed flag variable": lambda p: Case(
        [], {"KALSHI_RISK_GATE_ENABLED": "maybe"}, "KALSHI_RISK_GATE_ENABLED"
    ),
    "malformed base URL": lambda p: Case(
        [], _real(p, KALSHI_DEMO_BASE_URL="http://x"), "KALSHI_DEMO_BASE_URL"
    ),
    "missing env file": lambda p: Case(
        ["--env-file", str(p.root / "none.env")], {}, "no such file"
    ),
    "unparseable env file line": lambda p: Case(
        ["--env-file", _write(p.root / "bad.env", "A=1\nnonsense here\n")], {}, "line 2"
    ),
    "missing CA file": lambda p: Case(
        ["--exchange-ca-file", str(p.root / "none.pem")], {}, "no such file"
    ),
    "CA file without certificates": lambda p: Case(
        [], {"KALSHI_CA_FILE": _write(p.root / "junk.pem", "junk")}, "no CA certificate"
    ),
}
"""Every configuration and usage error ``executor serve`` reports before it serves (exit 2)."""


@pytest.mark.parametrize("name", sorted(CONFIGURATION_ERRORS))
def test_configuration_errors_exit_2(place: Place, name: str) -> None:
    """A configuration or usage error is one line on stderr and exit status 2; nothing listens."""
    case = CONFIGURATION_ERRORS[name](place)
    if name == "socket names a directory":
        place.socket = Path(".")
    elif name == "socket path too long":
        place.socket = place.root / ("s" * (108 - len(os.fsencode(place.root)) - 1))
        assert len(os.fsencode(place.socket)) == 108
    result = run_serve(place, case)
    assert_one_line_failure(result, case.needle)
    assert result.returncode == 2, result.stderr
    assert not (place.socket.exists() and place.socket.is_socket())


def _hold_lock(place: Place) -> Case:
    """Another process's lock on the socket: held by this test for the run."""
    lock = os.open(f"{place.socket}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    place.root.joinpath("held-lock-fd").write_text(str(lock))
    return Case([], {}, "another executor is running")


def _busy_port(place: Place) -> Case:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    _OPEN.append(listener)
    return Case(["--metrics", f"127.0.0.1:{listener.getsockname()[1]}"], {}, "cannot serve metrics")


def _unreachable_exchange(place: Place) -> Case:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    return Case(
        ["--exchange-ca-file", str(place.ca), "--log-level", "error"],
        _real(place, KALSHI_DEMO_BASE_URL=f"https://127.0.0.1:{port}"),
        "cannot be reached",
    )


def _database_under_a_file(place: Place) -> Case:
    blocker = place.root / "file"
    blocker.write_text("")
    return Case(["--telemetry-db", str(blocker / "t.db")], {}, "cannot open telemetry database")


_OPEN: list[socket.socket] = []

RUNTIME_FAILURES: dict[str, Callable[[Place], Case]] = {
    "lock held": _hold_lock,
    "metrics port in use": _busy_port,
    "exchange unreachable": _unreachable_exchange,
    "database cannot be opened": _database_under_a_file,
}
"""Start-up failures that are not the command's fault (exit 1)."""


@pytest.mark.parametrize("name", sorted(RUNTIME_FAILURES))
def test_runtime_failures_exit_1(place: Place, name: str) -> None:
    """A failure of the environment at start-up is one line on stderr and exit status 1."""
    try:
        case = RUNTIME_FAILURES[name](place)
        result = run_serve(place, case)
    finally:
        for sock in _OPEN:
            sock.close()
        _OPEN.clear()
        held = place.root / "held-lock-fd"
        if held.exists():
            os.close(int(held.read_text()))
    assert_one_line_failure(result, case.needle)
    assert result.returncode == 1, result.stderr
