"""A poller running as another user: ``--socket-mode 0660 --socket-group G`` lets a process of
group G connect and nobody else, with real user and group ids; and the refusals, one line each.

The real-id tests need root (to start processes as other users) and skip, saying so, without it;
``tests/wire/test_socket_access.py`` shows the mode and group bits without root. Each process is
started as root and becomes its user with ``os.setgroups``/``os.setgid``/``os.setuid`` once its
modules are loaded: the interpreter may live where other users cannot read (a home folder).
"""

from __future__ import annotations

import grp
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from executor.wire.protocol import WakeAck, decode_wake_ack, encode_frame, parse_frame_length
from tests.support.inprocess import make_wake
from tests.support.processes import (
    EXIT_TIMEOUT_S,
    Executor,
    Spawner,
    assert_one_line_failure,
    wait_until_accepting,
)

EXECUTOR_UID = 47_001
POLLER_UID = 47_002
STRANGER_UID = 47_003
"""User ids no account uses (a guess that holds on a CI image); a process may run as any id."""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="starting processes as other users needs root"
)

_CONNECT = """
import os, socket, sys
os.setgroups([])
os.setgid(int(sys.argv[3]))
os.setuid(int(sys.argv[2]))
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.settimeout(10)
try:
    client.connect(sys.argv[1])
except PermissionError as error:
    print("refused:", error.strerror)
    sys.exit(3)
client.sendall(sys.stdin.buffer.read())
reply = b""
while len(reply) < 4 or len(reply) < 4 + int.from_bytes(reply[:4], "big"):
    chunk = client.recv(65536)
    if not chunk:
        break
    reply += chunk
sys.stdout.buffer.write(reply)
"""
"""A poller in a few lines of standard library: become ``argv[2]``/``argv[3]`` (no other
groups), connect, send one frame, print the ack."""

_EXECUTOR_AS = """
import os, sys
import executor.cli, executor.server
os.setgroups([int(group) for group in sys.argv[3].split(",") if group])
os.setgid(int(sys.argv[2]))
os.setuid(int(sys.argv[1]))
sys.exit(executor.cli.main(sys.argv[4:]))
"""
"""``executor ARGS`` as user ``argv[1]``, group ``argv[2]``, other groups ``argv[3]`` (comma
list): the modules ``serve`` loads without an exchange are imported first, as root."""


def poller_group() -> grp.struct_group:
    """An existing group other than root's, to stand for the poller's group."""
    for entry in sorted(grp.getgrall(), key=lambda entry: entry.gr_gid):
        if entry.gr_gid not in (0, os.getegid()):
            return entry
    pytest.skip("no group besides root's on this machine")


def send_as(uid: int, gid: int, socket_path: Path, correlation_id: str) -> WakeAck | str:
    """Send one wake as ``uid``/``gid`` (no other groups): its ack, or ``refused: ...``."""
    run = subprocess.run(
        [sys.executable, "-I", "-c", _CONNECT, os.fspath(socket_path), str(uid), str(gid)],
        input=encode_frame(make_wake(correlation_id, dry_run=True)),
        capture_output=True,
        timeout=EXIT_TIMEOUT_S,
        check=False,
    )
    if run.returncode == 3:
        return run.stdout.decode().strip()
    assert run.returncode == 0, run.stderr.decode()
    return decode_wake_ack(run.stdout[4 : 4 + parse_frame_length(run.stdout[:4])])


def executor_as(spawner: Spawner, groups: list[int], *args: str | os.PathLike[str]) -> Executor:
    """Start ``executor ARGS`` as EXECUTOR_UID in its own group, plus ``groups``."""
    ids = (str(EXECUTOR_UID), str(EXECUTOR_UID), ",".join(str(group) for group in groups))
    command = [sys.executable, "-c", _EXECUTOR_AS, *ids, *(os.fspath(arg) for arg in args)]
    return spawner.start_command(command)


def serve_as(
    spawner: Spawner, groups: list[int], socket_path: Path, db_path: Path, *extra: str
) -> Executor:
    """``executor serve`` as EXECUTOR_UID, waited for until its socket accepts."""
    executor = executor_as(
        spawner, groups, "serve", "--socket", socket_path, "--telemetry-db", db_path, *extra
    )
    wait_until_accepting(executor, socket_path)
    return executor


def lay_out(base: Path, group: int, run_mode: int) -> tuple[Path, Path]:
    """A runtime folder (owner the executor, group ``group``, ``run_mode``) and a state folder
    the executor alone may use, as systemd's RuntimeDirectory and StateDirectory would be."""
    os.chmod(base, 0o711)
    run, state = base / "run", base / "state"
    run.mkdir()
    state.mkdir()
    os.chown(run, EXECUTOR_UID, group)
    os.chmod(run, run_mode)
    os.chown(state, EXECUTOR_UID, EXECUTOR_UID)
    os.chmod(state, 0o700)
    return run / "executor.sock", state / "t.db"


@needs_root
def test_a_process_of_the_socket_group_connects_and_others_cannot(
    spawner: Spawner, short_dir: Path
) -> None:
    """An executor running as its own user, in group G, gives its socket to G: a poller that is
    another user in G is served; a user outside G is refused by the kernel."""
    group = poller_group()
    socket_path, db_path = lay_out(short_dir, group.gr_gid, 0o750)
    executor = serve_as(
        spawner,
        [group.gr_gid],
        *(socket_path, db_path, "--socket-mode", "0660", "--socket-group", group.gr_name),
    )
    status = os.lstat(socket_path)
    assert (status.st_uid, status.st_gid, status.st_mode & 0o777) == (
        EXECUTOR_UID,
        group.gr_gid,
        0o660,
    )
    ack = send_as(POLLER_UID, group.gr_gid, socket_path, "from-the-poller")
    assert isinstance(ack, WakeAck) and ack.status == "accepted", ack
    assert send_as(STRANGER_UID, STRANGER_UID, socket_path, "stranger") == (
        "refused: Permission denied"
    )
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0, executor.stderr()
    assert "socket group cannot reach" not in executor.stderr()


@needs_root
def test_an_owner_only_socket_refuses_the_group_too(spawner: Spawner, short_dir: Path) -> None:
    """Negative twin: with the default mode the same poller, in the folder's group, is refused:
    the group access above comes from the flags."""
    group = poller_group()
    socket_path, db_path = lay_out(short_dir, group.gr_gid, 0o750)
    executor = serve_as(spawner, [group.gr_gid], socket_path, db_path)
    assert os.lstat(socket_path).st_mode & 0o777 == 0o600
    assert send_as(POLLER_UID, group.gr_gid, socket_path, "poller") == (
        "refused: Permission denied"
    )
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0


@needs_root
def test_a_folder_the_group_cannot_pass_is_warned_about(spawner: Spawner, short_dir: Path) -> None:
    """A group socket in a 0700 runtime folder: the start-up log names the folder, and the
    poller of that group is indeed refused."""
    group = poller_group()
    socket_path, db_path = lay_out(short_dir, group.gr_gid, 0o700)
    executor = serve_as(
        spawner,
        [group.gr_gid],
        *(socket_path, db_path, "--socket-mode", "0660", "--socket-group", str(group.gr_gid)),
        *("--log-format", "json"),
    )
    assert send_as(POLLER_UID, group.gr_gid, socket_path, "poller") == (
        "refused: Permission denied"
    )
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    warnings = [line for line in executor.stderr_lines() if "socket group cannot reach" in line]
    assert len(warnings) == 1 and f"cannot pass through {socket_path.parent}" in warnings[0]


@needs_root
def test_a_group_the_executor_is_not_in_is_refused_at_start(
    spawner: Spawner, short_dir: Path
) -> None:
    """An executor whose user is not in the group cannot give it the socket: one line, exit 2,
    nothing created."""
    group = poller_group()
    socket_path, db_path = lay_out(short_dir, group.gr_gid, 0o750)
    executor = executor_as(
        spawner,
        [],
        *("serve", "--socket", socket_path, "--telemetry-db", db_path),
        *("--socket-mode", "0660", "--socket-group", group.gr_name),
    )
    assert executor.wait() == 2
    lines = executor.stderr_lines()
    assert len(lines) == 1 and f"not in group {group.gr_name}" in lines[0], lines
    assert sorted(os.listdir(socket_path.parent)) == []
    assert not db_path.exists()


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--socket-group", "no-such-group-here"), "no group 'no-such-group-here'"),
        (("--socket-mode", "0666"), "every user on the machine"),
        (("--socket-mode", "u+rw"), "octal permission mode"),
        (("--socket-mode", "4660"), "not a permission mode"),
        (("--socket-group", str(os.getegid())), "gives the group nothing with --socket-mode 0600"),
    ],
)
def test_bad_socket_permissions_are_one_line_and_exit_2(
    spawner: Spawner, short_dir: Path, flags: tuple[str, str], words: str
) -> None:
    """A group that does not exist, a mode that is not a socket permission mode, or a group the
    mode gives nothing: one line, exit 2, no socket and no database."""
    run = spawner.run(
        *("serve", "--socket", short_dir / "x.sock", "--telemetry-db", short_dir / "t.db"),
        *flags,
    )
    assert_one_line_failure(run, words)
    assert run.returncode == 2
    assert sorted(path.name for path in short_dir.iterdir()) == []
