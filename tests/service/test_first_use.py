"""The rough edges of first use: dev.py serve, unusual socket and database paths, flag messages."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from executor.recording.database import open_database
from executor.server import ExecutorServer, ServerConfig
from executor.wire import unixsocket
from executor.wire.unixsocket import MAX_SOCKET_PATH_BYTES, SocketSetupError, remove_stale_socket
from tests.support.dev import DevServe, require_dev_environment
from tests.support.inprocess import make_wake
from tests.support.processes import (
    Spawner,
    assert_one_line_failure,
    exit_counters,
    request_all,
    wait_until_accepting,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spawner(short_dir: Path) -> Iterator[Spawner]:
    """A process starter whose leftovers are killed when the test ends, pass or fail."""
    spawner = Spawner(short_dir)
    try:
        yield spawner
    finally:
        spawner.kill_all()


# ---------------------------------------------------------------- dev.py serve


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_dev_serve_becomes_the_executor(short_dir: Path, signum: int) -> None:
    """dev.py serve execs the executor: a signal to its pid gives the orderly exit, no traceback."""
    require_dev_environment()
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    process = DevServe(short_dir, "--socket", socket_path, "--telemetry-db", db_path)
    try:
        wait_until_accepting(process, socket_path)
        # The pid dev.py started is now the executor itself, not a parent waiting on a child.
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
        assert b"executor" in cmdline
        assert b"serve" in cmdline
        assert request_all(socket_path, [make_wake("dev")])[0].status == "accepted"
        process.signal(signum)
        assert process.wait() == 0
    finally:
        process.kill()
    server, telemetry = exit_counters(process.stderr_lines())
    assert server["accepted"] == telemetry["rows_written"] == 1
    assert "Traceback" not in process.stderr()
    assert not socket_path.exists()
    with socket.socket(socket.AF_UNIX) as probe, pytest.raises(FileNotFoundError):
        probe.connect(os.fspath(socket_path))


def test_dev_serve_prints_the_commands_that_read_its_file(short_dir: Path) -> None:
    """dev.py serve names its database in ready-to-run stats and orders commands that work."""
    require_dev_environment()
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    process = DevServe(short_dir, "--socket", socket_path, "--telemetry-db", db_path)
    try:
        wait_until_accepting(process, socket_path)
        lines = [line.strip() for line in process.stderr_lines()]
        executor = Path(sys.prefix) / "bin" / "executor"
        for command in ("stats", "orders"):
            assert f"python3 dev.py {command} --telemetry-db {db_path}" in lines
            printed = f"{executor} {command} --telemetry-db {db_path}"
            assert printed in lines
            ran = subprocess.run(printed.split(), capture_output=True, text=True, timeout=60)
            assert ran.returncode == 0, ran.stderr
            assert str(db_path) in ran.stdout
        process.signal(signal.SIGTERM)
        assert process.wait() == 0
    finally:
        process.kill()


def test_dev_stats_and_orders_read_the_dev_database_by_default(short_dir: Path) -> None:
    """``dev.py stats`` / ``dev.py orders`` run the commands from the checkout on the try-out's
    var/try-out.db, or on the file named."""
    require_dev_environment()
    db_path = short_dir / "t.db"
    connection, _ = open_database(db_path)
    connection.close()
    for command, expected in (("stats", "latency_events: no rows"), ("orders", "no orders")):
        named = subprocess.run(
            [sys.executable, str(ROOT / "dev.py"), command, "--telemetry-db", str(db_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert named.returncode == 0, named.stderr
        assert expected in named.stdout
    default = subprocess.run(
        [sys.executable, str(ROOT / "dev.py"), "orders", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if default.returncode == 0:  # a try-out has run in this checkout: its file is read
        assert f'"database": "{ROOT / "var" / "try-out.db"}"' in default.stdout
    else:
        assert f"{ROOT / 'var' / 'try-out.db'}: no such file" in default.stderr


# ---------------------------------------------------------------- socket paths


@pytest.mark.parametrize("total_bytes", [98, 103, MAX_SOCKET_PATH_BYTES])
def test_long_folder_socket_paths_up_to_the_limit_are_served(
    spawner: Spawner, short_dir: Path, total_bytes: int
) -> None:
    """A short socket name under a long folder, up to 107 bytes in all, is served owner-only."""
    name = "x.sock"
    folder_bytes = total_bytes - len(name) - 1
    filler = folder_bytes - len(os.fsencode(short_dir)) - 1
    folder = short_dir / ("d" * filler)
    socket_path = folder / name
    assert len(os.fsencode(socket_path)) == total_bytes
    executor = spawner.serve(socket_path, short_dir / "t.db")
    assert stat.S_IMODE(os.lstat(socket_path).st_mode) == 0o600
    assert request_all(socket_path, [make_wake("long")])[0].status == "accepted"
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert not socket_path.exists()
    # The private bind folder is gone too: only the lock file stays.
    assert [path.name for path in folder.iterdir()] == [f"{name}.lock"]


@pytest.mark.parametrize(
    "path", ["", "/", ".", "..", "run/"], ids=["empty", "root", "dot", "dotdot", "slash"]
)
def test_socket_path_naming_a_directory_is_one_line(
    spawner: Spawner, short_dir: Path, path: str
) -> None:
    """An empty socket path, or one that names a directory, is one line and a non-zero exit."""
    refused = spawner.run("serve", "--socket", path, "--telemetry-db", short_dir / "t.db")
    assert_one_line_failure(refused, "socket")
    assert not (short_dir / "t.db").exists()


@pytest.mark.parametrize("target", ["missing", "file"])
def test_symlink_at_the_socket_path_is_called_a_symlink(
    spawner: Spawner, short_dir: Path, target: str
) -> None:
    """A symlink at the socket path (dangling or not) is refused as a symbolic link, left intact."""
    pointee = short_dir / target
    if target == "file":
        pointee.write_text("keep")
    socket_path = short_dir / "x.sock"
    socket_path.symlink_to(pointee)
    refused = spawner.run("serve", "--socket", socket_path, "--telemetry-db", short_dir / "t.db")
    assert_one_line_failure(refused, "symbolic link")
    assert socket_path.is_symlink()
    assert not (short_dir / "t.db").exists()


def test_stale_socket_we_may_not_remove_is_one_line(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale socket the user may not unlink (someone else's in sticky /tmp) is a setup error."""
    socket_path = short_dir / "x.sock"
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(os.fspath(socket_path))

    def refuse(path: object) -> None:
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(unixsocket.os, "unlink", refuse)
    with pytest.raises(SocketSetupError, match=r"cannot remove the stale socket .*not permitted"):
        remove_stale_socket(socket_path)


def test_socket_under_proc_says_what_is_wrong(spawner: Spawner, short_dir: Path) -> None:
    """A socket path under /proc names the kernel file system, not "No such file or directory"."""
    refused = spawner.run(
        "serve", "--socket", "/proc/trio-executor/x.sock", "--telemetry-db", short_dir / "t.db"
    )
    assert_one_line_failure(refused, "kernel file system")
    assert not (short_dir / "t.db").exists()


def test_socket_under_a_regular_file_says_what_is_wrong(spawner: Spawner, short_dir: Path) -> None:
    """A socket whose folder is a regular file says that folder is not a directory."""
    (short_dir / "plain").write_text("")
    refused = spawner.run(
        "serve", "--socket", short_dir / "plain" / "x.sock", "--telemetry-db", short_dir / "t.db"
    )
    assert_one_line_failure(refused, f"{short_dir / 'plain'} is not a directory")


# ---------------------------------------------------------------- the database path


def test_database_under_a_regular_file_says_what_is_wrong(
    spawner: Spawner, short_dir: Path
) -> None:
    """A database whose folder is a regular file says so, instead of mkdir's "File exists"."""
    (short_dir / "plain").write_text("")
    refused = spawner.run(
        "serve", "--socket", short_dir / "x.sock", "--telemetry-db", short_dir / "plain" / "t.db"
    )
    assert_one_line_failure(refused, f"{short_dir / 'plain'} is not a directory")
    assert "File exists" not in refused.stderr
    assert not (short_dir / "x.sock").exists()


@pytest.mark.parametrize("existing", [False, True], ids=["new-file", "existing-file"])
async def test_bind_failure_leaves_the_database_as_it_was(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    """A start-up failing at the bind neither creates the database nor changes an existing one."""
    db_path = short_dir / "t.db"
    if existing:
        db_path.write_bytes(b"")  # an empty file: the executor would make it a WAL database
    before = db_path.read_bytes() if existing else None

    def refuse(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(unixsocket.tempfile, "mkdtemp", refuse)
    server = ExecutorServer(
        ServerConfig(socket_path=short_dir / "x.sock", telemetry_db=db_path, handle_signals=False)
    )
    with trio.fail_after(10), pytest.raises(SocketSetupError, match="Permission denied"):
        await server.run()
    assert (db_path.read_bytes() if existing else None) == before
    assert db_path.exists() == existing
    assert not (short_dir / "t.db-wal").exists()
    assert not (short_dir / "x.sock").exists()


# ---------------------------------------------------------------- flags and help


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--contract-count", "many"], "whole number"),
        (["--telemetry-capacity", "1.5"], "whole number"),
        (["--grace", "soon"], "seconds"),
        (["--kill-switch-ttl", "-2"], "seconds"),
    ],
)
def test_flag_type_errors_are_in_words(
    spawner: Spawner, short_dir: Path, args: list[str], words: str
) -> None:
    """A malformed number says what is expected, never an internal function name."""
    refused = spawner.run("serve", "--socket", short_dir / "x.sock", *args)
    assert_one_line_failure(refused, args[0], words)
    assert "_positive_int" not in refused.stderr
    assert "_seconds" not in refused.stderr


def test_telemetry_linger_help_describes_its_default_and_zero(spawner: Spawner) -> None:
    """The --telemetry-linger help says what 0 does, separately from the default value."""
    shown = spawner.run("serve", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "0 commits what is queued at once (default 0.01)" in text


def test_killswitch_without_a_command_asks_for_one(spawner: Spawner, short_dir: Path) -> None:
    """``executor killswitch --kill-switch P`` with no command asks for a command, not a reason."""
    refused = spawner.run("killswitch", "--kill-switch", short_dir / "halt")
    assert refused.returncode == 1
    assert_one_line_failure(refused, "a command is required", "engage, release or status")
    assert "reason" not in refused.stderr
    assert not (short_dir / "halt").exists()
