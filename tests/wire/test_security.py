"""Security properties: the socket's mode from its first instant, the instance lock, the socket path
checks, the frame cap, bounded reasons, no private key in the repository, and a signer that never
prompts for a passphrase."""

from __future__ import annotations

import base64
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from executor.server import ExecutorServer, ServerConfig
from executor.wire.client import connect
from executor.wire.protocol import MAX_FRAME_BYTES, MAX_REASON_CHARS, encode_frame
from executor.wire.unixsocket import SocketSetupError
from tests.support.inprocess import RunningServer, make_wake
from tests.wire.test_socket_access import other_group

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
"""Hang guard for an executor subprocess to start or stop (not a timing assertion)."""


def executor_command(socket_path: Path, db_path: Path) -> list[str]:
    """``executor serve`` on ``socket_path`` with quiet logging."""
    return [
        *(sys.executable, "-m", "executor", "serve", "--socket", str(socket_path)),
        *("--telemetry-db", str(db_path), "--log-level", "error"),
    ]


def wait_for_socket(process: subprocess.Popen[bytes], socket_path: Path) -> None:
    """Poll (bounded) until the executor's socket exists; fail if the process dies first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not socket_path.exists():
        assert process.poll() is None, "executor exited during start-up"
        assert time.monotonic() < deadline, "executor did not start"
        time.sleep(0.005)


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGTERM the executor and return its exit status."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=START_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


class ModeRacer(threading.Thread):
    """Watches a socket path in a tight loop and records the mode of whatever appears there.

    It also looks inside any private bind directory (``.bind-*``) beside the path and records that
    directory's mode whenever something is inside it, because the socket may be wider there (the
    staging window is a few system calls long, so the racer catches it only sometimes).
    """

    def __init__(self, socket_path: Path) -> None:
        super().__init__(daemon=True)
        self.socket_path = socket_path
        self.public_modes: set[int] = set()
        self.public_groups: set[int] = set()
        self.sightings = 0
        self.private_dir_modes: set[int] = set()
        self.halt = threading.Event()

    def run(self) -> None:
        parent = self.socket_path.parent
        while not self.halt.is_set():
            try:
                status = os.lstat(self.socket_path)
            except FileNotFoundError:
                pass
            else:
                self.public_modes.add(status.st_mode)
                self.public_groups.add(status.st_gid)
                self.sightings += 1
            for name in os.listdir(parent):
                if name.startswith(".bind-"):
                    try:
                        dir_mode = os.lstat(parent / name).st_mode
                        if os.listdir(parent / name):
                            self.private_dir_modes.add(dir_mode)
                    except OSError:
                        pass


def test_socket_is_0600_from_its_first_instant(short_dir: Path) -> None:
    """A racer polling the path in a tight loop only ever sees a 0600 socket there."""
    socket_path = short_dir / "x.sock"
    racer = ModeRacer(socket_path)
    racer.start()
    try:
        for run in range(4):
            process = subprocess.Popen(
                executor_command(socket_path, short_dir / f"t{run}.db"),
                stdin=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for_socket(process, socket_path)
            finally:
                assert stop(process) == 0
    finally:
        racer.halt.set()
        racer.join()
    assert racer.sightings > 0, "the racer never saw the socket: the test proved nothing"
    assert racer.public_modes == {stat.S_IFSOCK | 0o600}
    assert all(stat.S_IMODE(mode) == 0o700 for mode in racer.private_dir_modes)
    print(f"racer: {racer.sightings} sightings, private bind dirs seen {racer.private_dir_modes}")


def test_a_group_socket_has_its_group_and_mode_from_its_first_instant(short_dir: Path) -> None:
    """With ``--socket-mode 0640 --socket-group G`` the racer only ever sees a 0640 socket of
    group G: never the process's own group, never the default mode."""
    gid = other_group()
    socket_path = short_dir / "x.sock"
    racer = ModeRacer(socket_path)
    racer.start()
    try:
        for run in range(4):
            process = subprocess.Popen(
                [
                    *executor_command(socket_path, short_dir / f"t{run}.db"),
                    *("--socket-mode", "0640", "--socket-group", str(gid)),
                ],
                stdin=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for_socket(process, socket_path)
            finally:
                assert stop(process) == 0
    finally:
        racer.halt.set()
        racer.join()
    assert racer.sightings > 0, "the racer never saw the socket: the test proved nothing"
    assert (racer.public_modes, racer.public_groups) == ({stat.S_IFSOCK | 0o640}, {gid})
    assert all(stat.S_IMODE(mode) == 0o700 for mode in racer.private_dir_modes)


def test_sigterm_as_soon_as_the_socket_exists_is_orderly(short_dir: Path) -> None:
    """A SIGTERM sent the moment the socket appears still gives exit 0, counters, no socket.

    Regression (fixed in d2f13c3): the socket was reachable before the signal handler existed,
    and such a SIGTERM killed the process by the default action in 15 of 20 tries.
    """
    for attempt in range(10):
        socket_path = short_dir / f"s{attempt}.sock"
        process = subprocess.Popen(
            executor_command(socket_path, short_dir / f"t{attempt}.db"),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not socket_path.exists():  # as tight as a harness could poll
                assert process.poll() is None and time.monotonic() < deadline
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=START_TIMEOUT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, f"attempt {attempt}: exit {process.returncode}"
        assert b"frames=0 " in stderr
        assert not socket_path.exists()


def test_racer_would_see_a_wide_socket(short_dir: Path) -> None:
    """Negative twin: a socket bound the naive way (umask 022, no chmod) is seen as 0755."""
    socket_path = short_dir / "naive.sock"
    racer = ModeRacer(socket_path)
    racer.start()
    old_umask = os.umask(0o022)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as naive:
            naive.bind(str(socket_path))
            deadline = time.monotonic() + START_TIMEOUT_S
            while racer.sightings == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
    finally:
        os.umask(old_umask)
        racer.halt.set()
        racer.join()
    assert stat.S_IFSOCK | 0o755 in racer.public_modes


def test_second_executor_is_refused_and_first_keeps_serving(short_dir: Path) -> None:
    """A second ``executor serve`` on a live path exits non-zero with one line; the first serves."""
    socket_path = short_dir / "x.sock"
    first = subprocess.Popen(
        executor_command(socket_path, short_dir / "a.db"),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_socket(first, socket_path)
        second = subprocess.run(
            executor_command(socket_path, short_dir / "b.db"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
        assert second.returncode != 0
        lines = second.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and "another executor" in lines[0]
        assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(START_TIMEOUT_S)
            client.connect(str(socket_path))
            client.sendall(encode_frame(make_wake("still-first")))
            assert b'"still-first"' in client.recv(4096)
    finally:
        assert stop(first) == 0


REFUSAL_TIMEOUT_S = 10.0
"""Bound on an in-process start-up that must be refused (s): a refusal takes milliseconds."""


def server_on(socket_path: Path) -> ExecutorServer:
    """An in-process executor configured for ``socket_path`` (not started)."""
    return ExecutorServer(
        ServerConfig(
            socket_path=socket_path,
            telemetry_db=socket_path.parent / "t.db",
            handle_signals=False,
        )
    )


async def test_too_long_socket_path_is_refused(short_dir: Path) -> None:
    """A socket path longer than sun_path holds is a clear error; nothing is created."""
    long_path = short_dir / ("s" * 120)
    with pytest.raises(SocketSetupError, match="bytes"), trio.fail_after(REFUSAL_TIMEOUT_S):
        await server_on(long_path).run()
    assert _snapshot(short_dir) == {}


def _regular_file(path: Path) -> None:
    path.write_text("precious")


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("precious")


def _symlink_to_file(path: Path) -> None:
    target = path.with_name("target.txt")
    target.write_text("precious")
    path.symlink_to(target)


def _symlink_to_socket(path: Path) -> None:
    target = path.with_name("elsewhere.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(target))
    path.symlink_to(target)


def _snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``directory`` except the lock file: its lstat mode and contents."""
    snapshot: dict[str, tuple[int, bytes]] = {}
    for path in sorted(directory.rglob("*")):
        if path.name.endswith(".lock"):
            continue
        mode = os.lstat(path).st_mode
        content = path.read_bytes() if stat.S_ISREG(mode) else os.fsencode(str(path.resolve()))
        snapshot[str(path.relative_to(directory))] = (mode, content)
    return snapshot


@pytest.mark.parametrize(
    "make_obstacle", [_regular_file, _directory, _symlink_to_file, _symlink_to_socket]
)
async def test_non_socket_at_path_is_refused_and_left_intact(
    short_dir: Path, make_obstacle: object
) -> None:
    """A file, directory or symlink (even to a socket: lstat says it is not one) at the socket
    path is refused, and it and its target are left exactly as they were."""
    socket_path = short_dir / "x.sock"
    assert callable(make_obstacle)
    make_obstacle(socket_path)
    before = _snapshot(short_dir)
    # Bounded: a regression that serves instead of refusing must fail, not hang the suite.
    with (
        pytest.raises(SocketSetupError, match="refusing to remove"),
        trio.fail_after(REFUSAL_TIMEOUT_S),
    ):
        await server_on(socket_path).run()
    assert _snapshot(short_dir) == before
    assert not (short_dir / "t.db").exists()


async def test_stale_socket_at_path_is_replaced(short_dir: Path, nursery: trio.Nursery) -> None:
    """Negative twin: a crashed executor's leftover socket is removed and the executor serves."""
    socket_path = short_dir / "x.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(socket_path))
    server = server_on(socket_path)
    await nursery.start(server.run)
    async with connect(socket_path) as client:
        assert (await client.request(make_wake("fresh"))).status == "accepted"
    server.request_shutdown()


@pytest.mark.parametrize("declared", [MAX_FRAME_BYTES + 1, 2**32 - 1])
async def test_frame_over_the_cap_closes_without_ack(
    executor_server: RunningServer, declared: int
) -> None:
    """A prefix over 65536, even followed by a whole valid body, closes the connection unacked."""
    body = orjson.dumps(make_wake("too-big"))
    body += b" " * (min(declared, MAX_FRAME_BYTES + 1) - len(body))
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(declared.to_bytes(4, "big") + body)
        with pytest.raises((EOFError, trio.BrokenResourceError)):
            await client.receive_ack()
    stats = executor_server.server.statistics()
    assert (stats.frames, stats.oversized_frames) == (0, 1)


def _huge_unknown_key() -> bytes:
    wake = orjson.loads(orjson.dumps(make_wake("k")))
    wake["k" * 60_000] = 1
    return orjson.dumps(wake)


def _huge_wrong_typed_string() -> bytes:
    wake = orjson.loads(orjson.dumps(make_wake("k")))
    wake["kalshi_price"] = "9" * 60_000
    return orjson.dumps(wake)


def _huge_invalid_json() -> bytes:
    return b'{"correlation_id":"' + b"\n\x01" * 30_000


@pytest.mark.parametrize(
    "make_body", [_huge_unknown_key, _huge_wrong_typed_string, _huge_invalid_json]
)
async def test_rejected_reason_is_bounded(
    executor_server: RunningServer, make_body: object
) -> None:
    """A 60 KB offending key or value is never echoed: the reason is one short line."""
    assert callable(make_body)
    body = make_body()
    assert 60_000 <= len(body) <= MAX_FRAME_BYTES
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(len(body).to_bytes(4, "big") + body)
        ack = await client.receive_ack()
    assert ack.status == "rejected" and ack.reason is not None
    assert len(ack.reason) <= MAX_REASON_CHARS
    assert len(ack.reason.splitlines()) == 1


_PEM_PRIVATE_KEY = re.compile(
    rb"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY)-----\r?\n"
    rb"((?:[A-Za-z0-9+/=:, -]*\r?\n)+?)"
    rb"-----END \1-----"
)


def private_keys_in(data: bytes) -> list[bytes]:
    """PEM private-key blocks in ``data`` whose body is long enough to be a real key.

    A header alone (in documentation, or a test's deliberately broken 9-byte "key") is not a key;
    the smallest real RSA key is hundreds of bytes of base64.
    """
    found = []
    for match in _PEM_PRIVATE_KEY.finditer(data):
        lines = [line for line in match.group(2).splitlines() if b":" not in line]
        payload = b"".join(line.strip() for line in lines)
        try:
            decoded = base64.b64decode(payload, validate=True)
        except ValueError:
            continue
        if len(decoded) >= 100:
            found.append(match.group(1))
    return found


def test_no_private_key_in_the_repository() -> None:
    """No git-tracked file holds a PEM private key."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout
    paths = [REPO_ROOT / os.fsdecode(name) for name in tracked.split(b"\0") if name]
    assert len(paths) > 10
    offenders = [
        str(path) for path in paths if path.is_file() and private_keys_in(path.read_bytes())
    ]
    assert offenders == []


def test_key_scanner_finds_a_real_key() -> None:
    """Negative twin: the scanner finds a freshly made key, plain or encrypted, amid other text."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    plain = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    assert private_keys_in(b"notes\n" + plain + b"more\n") == [b"RSA PRIVATE KEY"]
    assert private_keys_in(encrypted) == [b"ENCRYPTED PRIVATE KEY"]
    fake = b"-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
    assert private_keys_in(fake) == []


_LOAD_ENCRYPTED_KEY = """
import sys
from executor.signer import KalshiSigner, SignerKeyError
try:
    KalshiSigner(sys.argv[1])
except SignerKeyError as error:
    print("refused:", error)
    sys.exit(3)
print("loaded")
"""


def test_signer_never_prompts_for_a_passphrase(tmp_path: Path) -> None:
    """Loading an encrypted key with no terminal and stdin closed fails at once, SignerKeyError."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    path = tmp_path / "encrypted.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"hunter2"),
        )
    )
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_ENCRYPTED_KEY, str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=START_TIMEOUT_S,
        start_new_session=True,  # no controlling terminal: a prompt could not reach anyone
        check=False,
    )
    assert result.returncode == 3, result.stderr.decode()[-2000:]
    assert result.stdout.decode().startswith("refused:")
    assert "encrypted" in result.stdout.decode()
