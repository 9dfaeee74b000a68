"""Subprocess tests of the real ``executor`` command: signals, exit codes, the lock, the counters.

Only a real process shows these: what SIGTERM and SIGINT do, what is printed on stderr at exit, what
a second executor on the same socket is told, and what is left on disk afterwards. Every process is
started through ``Executor``, which gives each wait a hard timeout and kills the process in the
test's teardown if it is still alive, so a failing test never leaks an executor.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.cli import main
from executor.wire.protocol import (
    encode_frame,
)
from tests.support.inprocess import make_wake
from tests.support.processes import (
    EXIT_TIMEOUT_S,
    POLL_INTERVAL_S,
    START_TIMEOUT_S,
    Spawner,
    assert_one_line_failure,
    executor_command,
    exit_counters,
    open_client,
    receive_ack,
    request_all,
    wake_recv_count,
)

# ---------------------------------------------------------------- helpers


@pytest.fixture
def paths(short_dir: Path) -> tuple[Path, Path]:
    """The socket and database paths of one test's executor."""
    return short_dir / "x.sock", short_dir / "t.db"


# ---------------------------------------------------------------- shutdown and counters


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shutdown_prints_counters_and_keeps_every_row(
    spawner: Spawner, paths: tuple[Path, Path], signum: int
) -> None:
    """After N frames a SIGTERM or SIGINT exits 0 with both counter lines and N rows on disk."""
    socket_path, db_path = paths
    frames = 7
    executor = spawner.serve(socket_path, db_path)
    acks = request_all(socket_path, [make_wake(f"sig-{i}") for i in range(frames)])
    assert [ack.status for ack in acks] == ["accepted"] * frames

    executor.signal(signum)
    assert executor.wait() == 0
    server, telemetry = exit_counters(executor.stderr_lines())
    assert server["frames"] == server["accepted"] == frames
    assert server["rejected"] == 0
    assert telemetry["rows_written"] == server["accepted"]
    assert wake_recv_count(db_path) == frames
    assert "Traceback" not in executor.stderr()


def test_counters_count_rejected_frames(spawner: Spawner, paths: tuple[Path, Path]) -> None:
    """A rejected frame is counted as a frame but not accepted, and writes no row."""
    socket_path, db_path = paths
    executor = spawner.serve(socket_path, db_path)
    with open_client(socket_path) as sock:
        sock.sendall(encode_frame({"wat": 1}) + encode_frame(make_wake("good")))
        rejected, accepted = receive_ack(sock), receive_ack(sock)
    assert (rejected.status, accepted.status) == ("rejected", "accepted")

    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    server, telemetry = exit_counters(executor.stderr_lines())
    assert (server["frames"], server["accepted"], server["rejected"]) == (2, 1, 1)
    assert telemetry["rows_written"] == 1
    assert wake_recv_count(db_path) == 1


def test_second_signal_cuts_the_grace_short(spawner: Spawner, paths: tuple[Path, Path]) -> None:
    """With a half-read frame holding a 30 s grace open, a second SIGTERM makes it exit 0 now."""
    socket_path, db_path = paths
    executor = spawner.serve(socket_path, db_path, "--grace", "30")
    with open_client(socket_path) as sock:
        sock.sendall(encode_frame(make_wake("whole")))
        assert receive_ack(sock).status == "accepted"
        body = encode_frame(make_wake("half"))
        sock.sendall(body[: len(body) // 2])

        executor.signal(signal.SIGTERM)
        # Step 1 of the shutdown removes the socket file: the first signal has been handled.
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while socket_path.exists() and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)
        assert not socket_path.exists()
        # The connection task is still waiting for the rest of the body, inside the grace period.
        with pytest.raises(subprocess.TimeoutExpired):
            executor.wait(timeout=0.5)

        executor.signal(signal.SIGTERM)
        # Well inside the 30 s grace: only the second signal can have ended it.
        assert executor.wait(timeout=EXIT_TIMEOUT_S) == 0
    server, telemetry = exit_counters(executor.stderr_lines())
    assert server["frames"] == server["accepted"] == 1
    assert telemetry["rows_written"] == 1
    assert wake_recv_count(db_path) == 1


def test_the_same_signal_twice_at_once_is_one_request(
    spawner: Spawner, paths: tuple[Path, Path]
) -> None:
    """SIGTERM twice back to back (as timeout(1) sends it: to the process, then to its group)
    keeps the 30 s grace open; a later SIGTERM is a second request and ends it."""
    socket_path, db_path = paths
    executor = spawner.serve(socket_path, db_path, "--grace", "30")
    with open_client(socket_path) as sock:
        sock.sendall(encode_frame(make_wake("whole")))
        assert receive_ack(sock).status == "accepted"  # the connection is being served
        body = encode_frame(make_wake("half"))
        sock.sendall(body[: len(body) // 2])  # holds the connection inside the grace period
        executor.signal(signal.SIGTERM)
        # Apart enough that the kernel does not merge them (timeout's two are ~0.5 ms apart),
        # well inside the echo window.
        time.sleep(0.01)
        executor.signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            executor.wait(timeout=1.0)
        assert not socket_path.exists()  # the shutdown did begin
        executor.signal(signal.SIGTERM)
        assert executor.wait(timeout=EXIT_TIMEOUT_S) == 0
    stderr = executor.stderr()
    assert stderr.count("second signal: cutting the grace period short") == 1


RACE_ATTEMPTS = 6
"""Start-ups tried by the signal-race test; one lost race is enough to show the bug."""


def test_sigterm_right_after_the_socket_appears_is_orderly(
    spawner: Spawner, short_dir: Path
) -> None:
    """A SIGTERM sent the moment the socket file appears still gives an orderly exit 0.

    A harness that waits for the socket path and then stops the executor must never see it die of
    the default SIGTERM action. The moment is caught by spinning on the path (no sleep), because
    that is exactly when the window is open; the test repeats the start-up to hit it reliably.
    """
    for attempt in range(RACE_ATTEMPTS):
        socket_path = short_dir / f"r{attempt}.sock"
        executor = spawner.start(
            "serve", "--socket", socket_path, "--telemetry-db", short_dir / "r.db"
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not socket_path.exists():
            assert executor.alive(), executor.stderr()
            assert time.monotonic() < deadline, "the socket never appeared"
        executor.signal(signal.SIGTERM)
        assert executor.wait() == 0, f"attempt {attempt}: killed by the default SIGTERM action"
        server, _ = exit_counters(executor.stderr_lines())
        assert server["frames"] == 0
        assert not socket_path.exists()


# ---------------------------------------------------------------- the socket and the lock


def test_second_executor_is_refused_and_first_keeps_serving(
    spawner: Spawner, paths: tuple[Path, Path]
) -> None:
    """A second executor on the same socket exits non-zero with one line; the first still serves."""
    socket_path, db_path = paths
    first = spawner.serve(socket_path, db_path)

    refused = spawner.run(
        "serve", "--socket", socket_path, "--telemetry-db", socket_path.parent / "other.db"
    )
    assert_one_line_failure(refused, "another executor")

    assert first.alive()
    assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)
    assert request_all(socket_path, [make_wake("still-here")])[0].status == "accepted"
    first.signal(signal.SIGTERM)
    assert first.wait() == 0


@pytest.mark.parametrize("kind", ["regular file", "directory"])
def test_non_socket_at_the_socket_path_is_refused_and_left_intact(
    spawner: Spawner, paths: tuple[Path, Path], kind: str
) -> None:
    """A regular file or a directory at the socket path is refused, one line, and left as it was."""
    socket_path, db_path = paths
    if kind == "directory":
        socket_path.mkdir()
        (socket_path / "keep").write_text("inside")
    else:
        socket_path.write_text("not a socket")

    refused = spawner.run("serve", "--socket", socket_path, "--telemetry-db", db_path)

    assert_one_line_failure(refused, str(socket_path))
    if kind == "directory":
        assert socket_path.is_dir()
        assert (socket_path / "keep").read_text() == "inside"
    else:
        assert socket_path.read_text() == "not a socket"


def test_restart_after_sigkill_replaces_the_stale_socket(
    spawner: Spawner, paths: tuple[Path, Path]
) -> None:
    """After a SIGKILL leaves a stale socket behind, a new executor starts, serves and exits 0."""
    socket_path, db_path = paths
    crashed = spawner.serve(socket_path, db_path)
    crashed.signal(signal.SIGKILL)
    assert crashed.wait() == -signal.SIGKILL
    assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)  # stale: nobody is listening
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe,
        pytest.raises(ConnectionRefusedError),
    ):
        probe.connect(os.fspath(socket_path))

    successor = spawner.serve(socket_path, db_path)
    assert request_all(socket_path, [make_wake("after-crash")])[0].status == "accepted"
    successor.signal(signal.SIGTERM)
    assert successor.wait() == 0
    server, _ = exit_counters(successor.stderr_lines())
    assert server["accepted"] == 1


def test_socket_is_owner_only_while_running_and_removed_on_exit(
    spawner: Spawner, paths: tuple[Path, Path]
) -> None:
    """The socket is mode 0600 while the executor runs and gone once it has exited."""
    socket_path, db_path = paths
    executor = spawner.serve(socket_path, db_path)
    mode = os.lstat(socket_path).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    # A served request first: see test_sigterm_right_after_the_socket_appears for why.
    assert request_all(socket_path, [make_wake("mode")])[0].status == "accepted"

    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert not socket_path.exists()
    # The lock file may stay (unixsocket.InstanceLock explains why); it must not be a socket.
    leftovers = {path.name for path in socket_path.parent.iterdir()}
    assert "x.sock" not in leftovers


def test_missing_socket_directory_is_created(spawner: Spawner, short_dir: Path) -> None:
    """A socket whose parent directory does not exist yet is served: the directory is made."""
    socket_path = short_dir / "run" / "x.sock"
    assert not socket_path.parent.exists()
    executor = spawner.serve(socket_path, short_dir / "t.db")
    assert request_all(socket_path, [make_wake("made-dir")])[0].status == "accepted"
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert socket_path.parent.is_dir()


def test_socket_path_too_long_is_one_line_error(spawner: Spawner, short_dir: Path) -> None:
    """A socket path over 107 bytes is refused at start-up with one line and a non-zero exit."""
    socket_path = short_dir / ("s" * 120)
    assert len(os.fsencode(socket_path)) > 107
    refused = spawner.run("serve", "--socket", socket_path, "--telemetry-db", short_dir / "t.db")
    assert_one_line_failure(refused, "107")
    assert not socket_path.exists()


def test_socket_path_at_the_limit_is_served(spawner: Spawner, short_dir: Path) -> None:
    """A socket path of exactly 107 bytes is accepted (the negative twin of the too-long path)."""
    name_bytes = 107 - len(os.fsencode(short_dir)) - len(b"/")
    socket_path = short_dir / ("s" * name_bytes)
    assert len(os.fsencode(socket_path)) == 107
    executor = spawner.serve(socket_path, short_dir / "t.db")
    assert request_all(socket_path, [make_wake("limit")])[0].status == "accepted"
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0


def test_unopenable_database_is_one_line_and_nothing_listens(
    spawner: Spawner, paths: tuple[Path, Path]
) -> None:
    """A database path that is a directory fails start-up with one line, and no socket is left."""
    socket_path, db_path = paths
    db_path.mkdir()
    refused = spawner.run("serve", "--socket", socket_path, "--telemetry-db", db_path)
    assert_one_line_failure(refused)
    assert not socket_path.exists()


@pytest.mark.parametrize("folder_exists", [False, True], ids=["absent", "a-directory"])
@pytest.mark.parametrize("database", ["t.db", "sub/t.db"])
def test_a_socket_path_that_is_the_databases_folder_creates_nothing(
    spawner: Spawner, short_dir: Path, folder_exists: bool, database: str
) -> None:
    """``--socket D --telemetry-db D/t.db`` (or deeper) is one usage line, exit 2, and leaves
    no database (nor anything else) behind."""
    folder = short_dir / "d"
    if folder_exists:
        folder.mkdir()
    before = sorted(short_dir.rglob("*"))
    refused = spawner.run("serve", "--socket", folder, "--telemetry-db", folder / database)
    assert refused.returncode == 2
    assert_one_line_failure(refused, f"socket path {folder} is the folder of the telemetry")
    after = [path for path in sorted(short_dir.rglob("*")) if not path.name.endswith(".stderr")]
    assert after == before


def test_a_socket_path_that_is_the_database_itself_is_refused(
    spawner: Spawner, short_dir: Path
) -> None:
    """The same path for both: one usage line, exit 2, nothing created."""
    same = short_dir / "both"
    refused = spawner.run("serve", "--socket", same, "--telemetry-db", same)
    assert refused.returncode == 2
    assert_one_line_failure(refused, "is also the telemetry database")
    assert not same.exists()


# ---------------------------------------------------------------- flags and version


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        (
            "--versoin",
            "unrecognized option '--versoin' before the command; did you mean --version?",
        ),
        (
            "--verbose",
            "unrecognized option '--verbose' before the command; did you mean --version?",
        ),
        ("-x", "unrecognized option '-x' before the command"),
    ],
)
def test_an_unknown_option_before_the_command_is_named(
    capsys: pytest.CaptureFixture[str], typed: str, expected: str
) -> None:
    """A mistyped option with no command is named (with the closest one), not reported as a
    missing command; exit status 2."""
    with pytest.raises(SystemExit) as exited:
        main([typed])
    assert exited.value.code == 2
    assert capsys.readouterr().err == f"executor: error: {expected} (see --help)\n"


def test_a_missing_command_is_still_said_so(capsys: pytest.CaptureFixture[str]) -> None:
    """The twin: no arguments at all still says a command is required."""
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "the following arguments are required: COMMAND" in capsys.readouterr().err


def test_version_is_the_same_from_the_script_and_the_module(spawner: Spawner) -> None:
    """``executor --version`` and ``python -m executor --version`` print the same version line."""
    script = Path(sys.executable).with_name("executor")
    if not script.exists():
        pytest.skip(f"no console script at {script} (package not installed in this environment)")
    from_script = subprocess.run(
        [script, "--version"], capture_output=True, text=True, timeout=EXIT_TIMEOUT_S, check=False
    )
    from_module = subprocess.run(
        executor_command("--version"),
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )
    assert from_script.returncode == from_module.returncode == 0
    assert from_script.stdout == from_module.stdout
    words = from_module.stdout.split()
    assert words[0] == "executor"
    assert words[1][0].isdigit()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["serve"], "--socket"),
        (["serve", "--socket", "s", "--grace", "-1"], "--grace"),
        (["serve", "--socket", "s", "--grace", "nan"], "--grace"),
        (["serve", "--socket", "s", "--contract-count", "0"], "--contract-count"),
        (["serve", "--socket", "s", "--keep-warm", "-0.002"], "--keep-warm"),
        (["serve", "--socket", "s", "--log-format", "xml"], "--log-format"),
        (["serve", "--socket", "s", "--no-such-flag"], "--no-such-flag"),
        (["launch"], "launch"),
        ([], "COMMAND"),
    ],
    ids=[
        "no-socket",
        "negative-grace",
        "nan-grace",
        "zero-contracts",
        "negative-keep-warm",
        "bad-log-format",
        "unknown-flag",
        "unknown-command",
        "no-command",
    ],
)
def test_bad_flags_are_one_line_and_non_zero(
    spawner: Spawner, short_dir: Path, args: list[str], needle: str
) -> None:
    """Bad usage prints exactly one stderr line naming the problem, exits non-zero, no traceback."""
    refused = spawner.run(*args)
    assert_one_line_failure(refused, needle)
    assert not (short_dir / "s").exists()


# ---------------------------------------------------------------- the kill switch command


def outcome(run: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    """A finished command's exit status and standard output."""
    return run.returncode, run.stdout


def test_killswitch_command_engage_status_release(spawner: Spawner, short_dir: Path) -> None:
    """``executor killswitch`` status exits 0 released and 2 engaged; engage and release exit 0."""
    switch = short_dir / "halt"
    command: list[str | os.PathLike[str]] = ["killswitch", "--kill-switch", switch]

    assert outcome(spawner.run(*command, "status")) == (0, "released\n")
    assert outcome(spawner.run(*command, "engage", "market", "closed")) == (
        0,
        "engaged: market closed\n",
    )
    assert switch.read_text() == "market closed"
    assert outcome(spawner.run(*command, "status")) == (2, "engaged: market closed\n")
    assert spawner.run(*command, "release").returncode == 0
    assert not switch.exists()
    assert outcome(spawner.run(*command, "status")) == (0, "released\n")


def test_killswitch_unknown_command_exits_1_and_changes_nothing(
    spawner: Spawner, short_dir: Path
) -> None:
    """An unknown killswitch command exits 1 with one line and leaves the switch as it was."""
    switch = short_dir / "halt"
    switch.write_text("keep me")
    refused = spawner.run("killswitch", "--kill-switch", switch, "explode")
    assert refused.returncode == 1
    assert_one_line_failure(refused, "explode")
    assert switch.read_text() == "keep me"
    assert spawner.run("killswitch", "--kill-switch", switch, "status").returncode == 2
