"""``executor group reset``: bad usage and a configuration without a real exchange are one line
on stderr and exit status 1, nothing sent; the running executor it tells is checked first (the
reset itself: ``test_exchange_halts``, ``test_group_resume``)."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
import trio

from executor.cli import main
from executor.exchange.book.offline_reset import ProcessState, process_state, tell_the_executor
from executor.recording.orders.groups import RecordedGroup, executor_pids, record_order_group
from executor.runtime.signals import GROUP_RESET_SIGNAL
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, request_all


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["group"], "the following arguments are required"),
        (["group", "reset"], "--telemetry-db"),
        (["group", "resume", "--telemetry-db", "t.db"], "invalid choice"),
    ],
)
def test_bad_usage_is_one_line_and_exit_1(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing command, a missing database or an unknown command: exit 1, one line."""
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("executor group: ") and says in err[0]


def test_without_a_real_exchange_configured_nothing_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No KALSHI_API_KEY_ID / KALSHI_PRIVATE_KEY_PATH: exit 1 with one line naming them."""
    for name in ("KALSHI_API_KEY_ID", "KALSHI_PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert main(["group", "reset", "--telemetry-db", str(tmp_path / "t.db")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the group is reset on the exchange, but no exchange is configured" in line


def gone_pid() -> int:
    """The pid of a child that has ended and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_process_is_serving_a_file_only_while_it_holds_it_open(tmp_path: Path) -> None:
    """This process with the file open serves it; without it open, it is another process; a
    reaped child's pid and pid 0 are gone."""
    database = tmp_path / "t.db"
    database.write_bytes(b"")
    with database.open("rb"):
        assert process_state(os.getpid(), database) is ProcessState.SERVING
    assert process_state(os.getpid(), database) is ProcessState.OTHER
    assert process_state(gone_pid(), database) is ProcessState.GONE
    assert process_state(0, database) is ProcessState.GONE


def test_a_live_process_named_in_the_database_but_not_serving_it_is_not_signalled(
    tmp_path: Path,
) -> None:
    """A pid the order_groups row names, alive but without the database open (a reused pid): not
    signalled, and the command says no executor runs; SIGTERM is the first signal it gets."""
    database = tmp_path / "t.db"
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        record_order_group(database, RecordedGroup("og-1", "https://x", 2, 1, stranger.pid))
        assert executor_pids(database) == [stranger.pid]
        told, what = tell_the_executor(database)
        assert told and what.startswith("no executor runs on")
    finally:
        stranger.terminate()  # a SIGUSR1 delivered before would have ended it first
        assert stranger.wait(timeout=10) == -signal.SIGTERM


async def test_the_executor_serving_the_database_gets_the_reset_signal(tmp_path: Path) -> None:
    """The newest heartbeat's pid (this process) has the database open: it is the one signalled,
    with the group reset signal, before an older order_groups pid that is gone."""
    database = tmp_path / "t.db"
    gone = await trio.to_thread.run_sync(gone_pid)
    record_order_group(database, RecordedGroup("og-1", "https://x", 2, 1, gone))
    with contextlib.closing(sqlite3.connect(database)) as connection, connection:
        beats = [("executor:/x.sock", os.getpid(), 5), ("poller", 1, 9)]
        connection.executemany("INSERT INTO heartbeats VALUES (?, ?, 1, ?, 0, 0)", beats)
    assert executor_pids(database) == [os.getpid(), gone]
    with trio.open_signal_receiver(GROUP_RESET_SIGNAL) as signals, database.open("rb"):
        told, what = await trio.to_thread.run_sync(tell_the_executor, database)
        with trio.fail_after(10):
            async for signum in signals:
                assert signum == GROUP_RESET_SIGNAL
                break
    assert told and f"(pid {os.getpid()}) told" in what


def test_the_reset_signal_leaves_a_running_executor_serving(
    spawner: Spawner, short_dir: Path
) -> None:
    """SIGUSR1 (what ``executor group reset`` sends) does not end an executor: it still acks a
    wake afterwards and exits 0 on SIGTERM (the signal's default action would have killed it)."""
    socket_path = short_dir / "x.sock"
    executor = spawner.serve(socket_path, short_dir / "t.db", "--exchange", "fake")
    executor.signal(GROUP_RESET_SIGNAL)
    executor.signal(GROUP_RESET_SIGNAL)
    assert [ack.status for ack in request_all(socket_path, [make_wake("after")])] == ["accepted"]
    assert executor.alive()
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
