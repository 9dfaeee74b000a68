"""Readiness notification (``NOTIFY_SOCKET``): datagrams a test-bound socket receives, in order."""

from __future__ import annotations

import os
import signal
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.runtime.notify import MAX_STATUS_CHARS, NOTIFY_SOCKET_ENV, ServiceNotifier
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, request_all, wait_until_accepting


@pytest.fixture
def receiver(short_dir: Path) -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket bound at a path, standing in for systemd's notification socket."""
    path = short_dir / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.fspath(path))
    sock.settimeout(5)
    try:
        yield sock, os.fspath(path)
    finally:
        sock.close()


def _pending(sock: socket.socket) -> list[str]:
    """Every datagram waiting on ``sock``, decoded, in arrival order."""
    messages = []
    sock.setblocking(False)
    try:
        while True:
            messages.append(sock.recv(4096).decode())
    except BlockingIOError:
        return messages
    finally:
        sock.settimeout(5)


def test_status_ready_stopping_arrive_in_order(receiver: tuple[socket.socket, str]) -> None:
    """STATUS lines, READY=1 and STOPPING=1 arrive as separate datagrams in the order sent."""
    sock, address = receiver
    notifier = ServiceNotifier(address)
    notifier.status("opening the telemetry database")
    notifier.status("starting the order path")
    notifier.ready("serving on /run/x.sock")
    notifier.stopping()
    notifier.close()
    assert _pending(sock) == [
        "STATUS=opening the telemetry database",
        "STATUS=starting the order path",
        "READY=1\nSTATUS=serving on /run/x.sock",
        "STOPPING=1",
    ]
    assert (notifier.sent, notifier.failed) == (4, 0)


def test_abstract_namespace_address() -> None:
    """An ``@name`` address reaches a socket bound in the abstract namespace (a leading NUL)."""
    name = f"trio-executor-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        notifier = ServiceNotifier(f"@{name}")
        assert notifier.enabled
        notifier.ready()
        notifier.close()
        assert sock.recv(4096) == b"READY=1"


def test_status_is_one_bounded_line(receiver: tuple[socket.socket, str]) -> None:
    """A status text with newlines is sent as one line, cut to MAX_STATUS_CHARS."""
    sock, address = receiver
    notifier = ServiceNotifier(address)
    notifier.status("two\nlines " + "x" * 1000)
    notifier.close()
    (message,) = _pending(sock)
    assert "\n" not in message
    assert message.startswith("STATUS=two lines x")
    assert len(message) == len("STATUS=") + MAX_STATUS_CHARS


def test_without_notify_socket_nothing_is_sent() -> None:
    """No NOTIFY_SOCKET: a disabled notifier whose calls send nothing."""
    environ = {"HOME": "/"}
    notifier = ServiceNotifier.from_environment(environ)
    assert not notifier.enabled
    notifier.ready()
    assert (notifier.sent, notifier.failed) == (0, 0)


def test_from_environment_removes_the_variable(receiver: tuple[socket.socket, str]) -> None:
    """The variable is taken out of the environment so child processes never inherit it."""
    _, address = receiver
    environ = {NOTIFY_SOCKET_ENV: address}
    notifier = ServiceNotifier.from_environment(environ)
    assert notifier.enabled and notifier.address == address
    assert NOTIFY_SOCKET_ENV not in environ


def test_unsupported_address_disables_the_notifier() -> None:
    """A relative path or vsock address is not guessed at: the notifier sends nothing."""
    for address in ("relative/notify.sock", "vsock:2:1234", "@"):
        notifier = ServiceNotifier(address)
        assert not notifier.enabled
        assert notifier.send("READY=1") is False


def test_a_missing_socket_is_counted_not_raised(short_dir: Path) -> None:
    """A send to a path where nothing listens fails quietly and is counted."""
    notifier = ServiceNotifier(os.fspath(short_dir / "gone.sock"))
    assert notifier.send("READY=1") is False
    notifier.ready()
    notifier.close()
    assert (notifier.sent, notifier.failed) == (0, 2)


def test_a_full_receiver_never_blocks(receiver: tuple[socket.socket, str]) -> None:
    """A receiver that never reads fills up; further status lines are dropped at once and
    counted instead of blocking."""
    _, address = receiver
    notifier = ServiceNotifier(address)
    attempts = 5000  # far beyond net.unix.max_dgram_qlen (10 by default, 512 on some hosts)
    for _ in range(attempts):
        notifier.status("filling the queue")
    notifier.close()
    assert notifier.dropped > 0
    assert notifier.sent + notifier.dropped == attempts
    assert notifier.failed == 0


def _fill(address: str) -> int:
    """Datagrams sent to ``address`` from a socket of the test's own until its queue is full."""
    count = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as filler:
        filler.setblocking(False)
        try:
            while True:
                filler.sendto(b"X-FILLER=1", address)
                count += 1
        except BlockingIOError:
            return count


def _until_ready(sock: socket.socket) -> list[str]:
    """Every datagram up to and including the first ``READY=1`` one (5 s timeout each)."""
    messages = [_receive(sock)]
    while not messages[-1].startswith("READY=1"):
        messages.append(_receive(sock))
    return messages


def test_ready_waits_out_a_full_queue(receiver: tuple[socket.socket, str]) -> None:
    """With the receiver's queue full, status lines are dropped and counted while READY=1 and
    STOPPING=1 are retried until the receiver reads, and arrive in order."""
    sock, address = receiver
    queued = _fill(address)
    notifier = ServiceNotifier(address)
    notifier.status("opening the telemetry database")
    notifier.ready("serving")
    notifier.status("dropped while READY=1 waits, so it cannot overtake it")
    notifier.stopping()
    notifier.close()
    assert (notifier.sent, notifier.dropped) == (0, 2)
    messages = [_receive(sock) for _ in range(queued + 2)]
    assert messages == ["X-FILLER=1"] * queued + ["READY=1\nSTATUS=serving", "STOPPING=1"]
    assert notifier.wait_sent(5.0)
    assert (notifier.sent, notifier.failed, notifier.dropped) == (2, 0, 2)


def test_a_free_queue_needs_no_retry_thread(receiver: tuple[socket.socket, str]) -> None:
    """The twin: with room in the queue READY=1 is sent at once, on the caller's thread."""
    sock, address = receiver
    notifier = ServiceNotifier(address)
    notifier.ready()
    notifier.close()
    assert notifier.sent == 1
    assert notifier.wait_sent(0.0)
    assert _pending(sock) == ["READY=1"]


def _receive(sock: socket.socket) -> str:
    """The next datagram (the receiver's 5 s timeout bounds the wait)."""
    return sock.recv(4096).decode()


def test_a_served_executor_keeps_ready_through_a_full_queue(
    receiver: tuple[socket.socket, str],
    spawner: Spawner,
    short_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A notification socket left unread through start-up (its queue full before the executor
    starts) still receives READY=1 once it is read, after the executor already serves."""
    sock, address = receiver
    queued = _fill(address)
    monkeypatch.setenv(NOTIFY_SOCKET_ENV, address)
    socket_path = short_dir / "x.sock"
    executor = spawner.serve(socket_path, short_dir / "t.db", "--exchange", "none")
    wait_until_accepting(executor, socket_path)
    # An ack means the loop ran past the READY=1 call (it is made before any connection runs).
    assert [ack.status for ack in request_all(socket_path, [make_wake("after-start")])] == [
        "accepted"
    ]
    sock.settimeout(30)  # the retry thread's backoff, on a busy machine
    messages = _until_ready(sock)
    assert messages[:queued] == ["X-FILLER=1"] * queued
    assert messages[-1] == f"READY=1\nSTATUS=serving on {socket_path}"
    executor.signal(signal.SIGTERM)
    assert _receive(sock).startswith("STOPPING=1")
    assert executor.wait() == 0


@pytest.mark.parametrize("exchange", ["none", "fake"])
def test_a_served_executor_notifies_in_order(
    receiver: tuple[socket.socket, str],
    spawner: Spawner,
    short_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    exchange: str,
) -> None:
    """Under NOTIFY_SOCKET: STATUS while starting, READY=1 once the socket accepts, STOPPING=1 on
    SIGTERM, in that order, and nothing else."""
    sock, address = receiver
    sock.settimeout(30)  # start-up of a fresh interpreter on a busy machine
    monkeypatch.setenv(NOTIFY_SOCKET_ENV, address)
    socket_path = short_dir / "x.sock"
    executor = spawner.start(
        "serve",
        "--socket",
        socket_path,
        "--telemetry-db",
        short_dir / "t.db",
        "--exchange",
        exchange,
    )
    starting = []
    while not (message := _receive(sock)).startswith("READY=1"):
        starting.append(message)
    assert message == f"READY=1\nSTATUS=serving on {socket_path}"
    with socket.socket(socket.AF_UNIX) as probe:  # READY=1 means a poller can connect now
        probe.connect(os.fspath(socket_path))
    if exchange == "fake":
        # The exchange side comes first: everything about it that can fail is found before the
        # database is created.
        assert starting[0] == "STATUS=starting the in-process fake exchange"
        assert starting[1].startswith("STATUS=pre-warming the exchange client (https://")
        assert starting[2:] == [
            "STATUS=reading the account's rate limits",
            "STATUS=starting the signing-ahead worker process",
            "STATUS=starting the shadow signing worker process",
            "STATUS=opening the telemetry database",
            "STATUS=starting the order path",
            "STATUS=reconciling the orders earlier runs left unresolved",
            "STATUS=warm-starting the risk gate from orders_fired",
            "STATUS=finding or creating this installation's order group",
            "STATUS=reading the exchange's status (a trading or exchange pause)",
            "STATUS=polling the account (balance, positions)",
            "STATUS=connecting the exchange's stream (fills, order updates)",
        ]
    else:
        assert starting == ["STATUS=opening the telemetry database"]
    executor.signal(signal.SIGTERM)
    assert (
        _receive(sock) == "STOPPING=1\nSTATUS=shutting down: finishing in-flight frames and fires"
    )
    assert executor.wait() == 0
    assert _pending(sock) == []
