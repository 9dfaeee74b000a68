"""A start-up that fails leaves the directory as it found it, and sends no order.

Each check that can fail with an exchange configured (the metrics port, the exchange's
reachability, the CA file, the key, a database that cannot be written) runs as a real
``executor serve`` whose socket and database are in a directory of their own: after the one-line
refusal the directory holds exactly what it held before (no database, ``-wal``, ``-shm``, socket,
``.lock`` or bind folder).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from executor.fake.exchange import ORDER_PATH, FakeCredentials, FakeExchange
from executor.recording.database import close_database, open_database
from tests.support.processes import EXIT_TIMEOUT_S, assert_one_line_failure, executor_command

START_TIMEOUT_S = 60.0
"""Bound on one refused start (an interpreter start and a TLS handshake on a loaded machine)."""


def listing(directory: Path) -> list[str]:
    """Every path under ``directory``, relative, sorted."""
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def clean_environment(**settings: str) -> dict[str, str]:
    """This process's environment without stray KALSHI_* settings, plus ``settings``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("KALSHI_")}
    env.update(settings)
    return env


def serve(directory: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``executor serve`` on ``directory/run/x.sock`` and ``directory/t.db`` to its end."""
    return subprocess.run(
        executor_command(
            "serve",
            "--socket",
            directory / "run" / "x.sock",
            "--telemetry-db",
            directory / "t.db",
            "--log-level",
            "error",
            *extra,
        ),
        env=env,
        cwd=directory,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )


def credentials_env(credentials: FakeCredentials, base_url: str, **extra: str) -> dict[str, str]:
    """Real-mode settings for the fake's key and CA, trading at ``base_url``."""
    settings = {
        "KALSHI_API_KEY_ID": credentials.key_id,
        "KALSHI_PRIVATE_KEY_PATH": str(credentials.private_key_path),
        "KALSHI_DEMO_BASE_URL": base_url,
        "KALSHI_CA_FILE": str(credentials.ca_file),
        "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
    }
    return clean_environment(**{**settings, **extra})


@contextmanager
def busy_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that something is listening on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@contextmanager
def closed_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, never listening: refused)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def test_a_busy_metrics_port_leaves_no_lock_file(short_dir: Path) -> None:
    """--metrics on a port in use: one line, and no .lock (nor the socket's folder) remains."""
    with busy_port() as port:
        run = serve(short_dir, clean_environment(), "--metrics", str(port))
    assert_one_line_failure(run, "cannot serve metrics")
    assert listing(short_dir) == []


def test_an_unreachable_exchange_leaves_no_database(
    short_dir: Path, fake_credentials: FakeCredentials
) -> None:
    """An exchange nobody answers at: one line, and no database, -wal, -shm or lock remains."""
    with closed_port() as port:
        run = serve(short_dir, credentials_env(fake_credentials, f"https://127.0.0.1:{port}"))
    assert_one_line_failure(run, "cannot be reached")
    assert listing(short_dir) == []


def test_an_unusable_ca_file_leaves_no_database(
    short_dir: Path, fake_credentials: FakeCredentials
) -> None:
    """A CA file that is not PEM certificates: one line, and only the CA file itself remains."""
    ca_file = short_dir / "ca.pem"
    ca_file.write_text("not a certificate\n")
    env = credentials_env(fake_credentials, "https://127.0.0.1:9", KALSHI_CA_FILE=str(ca_file))
    run = serve(short_dir, env)
    assert_one_line_failure(run, "ca.pem")
    assert listing(short_dir) == ["ca.pem"]


def test_a_bad_key_leaves_nothing(short_dir: Path, fake_credentials: FakeCredentials) -> None:
    """A private key file that is not a key: one line, and only the key file remains."""
    key = short_dir / "key.pem"
    key.write_text("not a key\n")
    key.chmod(0o600)  # the owner's alone: its content is what is wrong
    env = credentials_env(fake_credentials, "https://127.0.0.1:9", KALSHI_PRIVATE_KEY_PATH=str(key))
    run = serve(short_dir, env)
    assert_one_line_failure(run, "key.pem")
    assert listing(short_dir) == ["key.pem"]


def earlier_run(db_path: Path) -> None:
    """A database as an earlier executor left it (its schema, WAL mode, closed cleanly)."""
    connection, _ = open_database(db_path)
    close_database(connection, db_path)
    assert listing(db_path.parent) == [db_path.name]


def make_unwritable(path: Path) -> None:
    """Make ``path`` a file this process cannot write, even as root (which ignores modes)."""
    path.chmod(0o444)
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)


def make_writable(path: Path) -> None:
    """Undo :func:`make_unwritable` (so the test's directory can be removed)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)
    path.chmod(0o644)


async def test_a_read_only_database_with_an_exchange_refuses_to_start_and_sends_nothing(
    short_dir: Path, fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """An existing database the executor cannot write: with an exchange, start-up stops with one
    line naming it, no order reaches the exchange, and nothing is left behind."""
    db_path = short_dir / "t.db"
    earlier_run(db_path)
    make_unwritable(db_path)
    try:
        before = listing(short_dir)
        env = credentials_env(fake_credentials, fake_exchange.base_url)
        run = await trio.to_thread.run_sync(serve, short_dir, env)
        after = listing(short_dir)
    finally:
        make_writable(db_path)
    assert_one_line_failure(run, "t.db", "not writable")
    assert after == before
    assert [request.path for request in fake_exchange.received if request.path == ORDER_PATH] == []


def test_the_same_read_only_database_without_an_exchange_still_serves(short_dir: Path) -> None:
    """Without an exchange there is no order to audit: the unwritable database is no reason to
    refuse (the executor serves; its rows are dropped and counted)."""
    db_path = short_dir / "t.db"
    earlier_run(db_path)
    make_unwritable(db_path)
    socket_path = short_dir / "x.sock"
    try:
        process = subprocess.Popen(
            executor_command("serve", "--socket", socket_path, "--telemetry-db", db_path),
            env=clean_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline_tries = int(START_TIMEOUT_S / 0.05)
            for _ in range(deadline_tries):
                if socket_path.exists() or process.poll() is not None:
                    break
                trio_free_sleep(0.05)
            assert process.poll() is None, process.communicate()[1]
            process.terminate()
            assert process.wait(timeout=EXIT_TIMEOUT_S) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stderr is not None:
                process.stderr.close()
    finally:
        make_writable(db_path)


def trio_free_sleep(seconds: float) -> None:
    """A plain blocking pause for a synchronous test (no event loop runs here)."""
    import time

    time.sleep(seconds)


@pytest.fixture(autouse=True)
def _no_stray_dotenv(short_dir: Path) -> None:
    """The executor runs with ``cwd`` = the test's directory: no ``.env`` is there to read."""
    assert not (short_dir / ".env").exists()
