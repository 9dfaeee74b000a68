"""The telemetry writer thread gives way to the loop's (``executor.runtime.thread_priority``,
``executor serve --writer-priority``).

``give_way`` lowers the calling thread (``idle``: ``SCHED_IDLE``; ``low``: ``LOW_NICE`` above the
process's nice value) when it may run on more than one CPU, and leaves it alone on one;
``restore`` puts it back, or says why it cannot. A served executor's writer thread runs under the
ordinary policy by default, under ``SCHED_IDLE`` with ``--writer-priority idle`` and at the
lowered nice value with ``--writer-priority low``. Nothing here is timed: the served tests poll
for the row that proves the writer ran, as ``wait_until_accepting`` polls for the socket.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from executor.runtime import thread_priority
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, open_client, receive_ack

pytestmark = pytest.mark.skipif(
    not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's; elsewhere give_way only logs"
)

ROW_DEADLINE_S = 30.0
"""Longest the served test waits for the executor's first row (a generous bound, not a figure)."""


def in_thread(body: Callable[[], Any]) -> Any:
    """``body()`` run in a thread of its own (its policy changes die with it); its result."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(body()))
    thread.start()
    thread.join()
    return results[0]


def may_leave_idle() -> bool:
    """Whether this process may put a thread back from ``SCHED_IDLE`` (root, or RLIMIT_NICE 20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    return os.geteuid() == 0 or soft == resource.RLIM_INFINITY or soft >= 20


def test_a_thread_with_two_cpus_gives_way_and_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With two CPUs to run on, the thread goes under SCHED_IDLE; ``restore`` puts it back under
    SCHED_OTHER where the process may (and otherwise leaves it, as the next test shows)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})

    def body() -> tuple[bool, int, int]:
        lowered = thread_priority.give_way()
        during = os.sched_getscheduler(0)
        thread_priority.restore()
        return lowered, during, os.sched_getscheduler(0)

    lowered, during, after = in_thread(body)
    assert lowered
    assert during == os.SCHED_IDLE
    assert after == (os.SCHED_OTHER if may_leave_idle() else os.SCHED_IDLE)


def test_a_thread_with_one_cpu_keeps_its_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Alone on one CPU the writer would starve behind a busy loop: it is left as it is."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {1})
    with structlog.testing.capture_logs() as logs:
        lowered, policy = in_thread(lambda: (thread_priority.give_way(), os.sched_getscheduler(0)))
    assert not lowered
    assert policy == os.SCHED_OTHER
    assert [entry["reason"] for entry in logs] == ["it has one CPU"]


def test_a_refused_change_is_logged_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused lowering and a refused restore each log their reason; neither raises."""

    def refuse(*_: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with structlog.testing.capture_logs() as logs:
        lowered = thread_priority.give_way()
        thread_priority.restore()
    assert not lowered
    assert [entry["event"] for entry in logs] == [
        "writer thread priority unchanged",
        "writer thread stays at lowered priority",
    ]
    assert all("not permitted" in entry["reason"] for entry in logs)


def writer_policy(spawner: Spawner, directory: Path, *extra: str) -> int:
    """The scheduling policy of a served executor's writer thread, once it has written a row."""
    return writer_thread_value(spawner, directory, os.sched_getscheduler, *extra)


def writer_nice(spawner: Spawner, directory: Path, *extra: str) -> int:
    """The nice value of a served executor's writer thread, once it has written a row."""
    return writer_thread_value(
        spawner, directory, lambda tid: os.getpriority(os.PRIO_PROCESS, tid), *extra
    )


def writer_thread_value(
    spawner: Spawner, directory: Path, read: Callable[[int], int], *extra: str
) -> int:
    """``read(tid)`` of a served executor's writer thread, once it has written a row."""
    directory.mkdir()
    socket_path, db_path = directory / "x.sock", directory / "t.db"
    executor = spawner.serve(socket_path, db_path, *extra)
    with open_client(socket_path) as sock:
        sock.sendall(encode_frame(make_wake("w", dry_run=True)))
        assert receive_ack(sock).status == "accepted"
    deadline = time.monotonic() + ROW_DEADLINE_S
    while rows(db_path) == 0:
        assert time.monotonic() < deadline, "no row written"
        time.sleep(0.01)
    tasks = Path(f"/proc/{executor.pid}/task")
    writers = [
        int(task.name)
        for task in tasks.iterdir()
        if (task / "comm").read_text().startswith("write_batches")
    ]
    values = {read(tid) for tid in writers}
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert len(values) == 1, values
    return values.pop()


def rows(db_path: Path) -> int:
    """``wake_recv`` rows committed so far."""
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as connection:
        query = "SELECT COUNT(*) FROM latency_events WHERE stage = 'wake_recv'"
        return int(connection.execute(query).fetchone()[0])


def test_served_writer_gives_way_with_idle_and_not_by_default(
    spawner: Spawner, short_dir: Path
) -> None:
    """``executor serve --writer-priority idle`` runs the writer thread under SCHED_IDLE (where it
    may use two CPUs, as this test's children may); by default it stays under SCHED_OTHER."""
    expected = os.SCHED_IDLE if len(os.sched_getaffinity(0)) > 1 else os.SCHED_OTHER
    idle = writer_policy(spawner, short_dir / "idle", "--writer-priority", "idle")
    assert idle == expected
    assert writer_policy(spawner, short_dir / "default") == os.SCHED_OTHER


def thread_nice() -> int:
    """The calling thread's own nice value (Linux: a thread id names one thread)."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def may_lower_nice() -> bool:
    """Whether this process may lower a thread's nice value back (root, or RLIMIT_NICE 20)."""
    return may_leave_idle()


def test_low_raises_the_threads_nice_value_alone_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``low`` with two CPUs: the thread's nice value is the process's plus ``LOW_NICE`` (the
    process's own unchanged); ``restore`` puts it back where the process may."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    process_before = os.getpriority(os.PRIO_PROCESS, os.getpid())

    def body() -> tuple[bool, int, int, int]:
        before = thread_nice()
        lowered = thread_priority.give_way("low")
        during = thread_nice()
        thread_priority.restore("low")
        return lowered, before, during, thread_nice()

    lowered, before, during, after = in_thread(body)
    assert lowered
    assert during == min(before + thread_priority.LOW_NICE, 19)
    assert os.getpriority(os.PRIO_PROCESS, os.getpid()) == process_before
    assert after == (before if may_lower_nice() else during)


def test_low_with_one_cpu_keeps_the_nice_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Alone on one CPU, ``low`` leaves the thread's nice value as it is, and says why."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {1})

    def body() -> tuple[bool, int, int]:
        before = thread_nice()
        return thread_priority.give_way("low"), before, thread_nice()

    with structlog.testing.capture_logs() as logs:
        lowered, before, after = in_thread(body)
    assert not lowered
    assert before == after
    assert [entry["reason"] for entry in logs] == ["it has one CPU"]


def test_a_refused_nice_restore_is_logged_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A nice value the process may not lower back is logged with its reason, not raised."""

    def refuse(*_: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "setpriority", refuse)
    with structlog.testing.capture_logs() as logs:
        thread_priority.restore("low")
    assert [(entry["event"], entry["priority"]) for entry in logs] == [
        ("writer thread stays at lowered priority", "low")
    ]
    assert "denied" in logs[0]["reason"]


def test_served_writer_runs_niced_with_low_and_not_by_default(
    spawner: Spawner, short_dir: Path
) -> None:
    """``executor serve --writer-priority low`` raises the writer thread's nice value by
    ``LOW_NICE`` (where it may use two CPUs, as this test's children may); by default the writer
    keeps the process's nice value."""
    base = os.getpriority(os.PRIO_PROCESS, os.getpid())
    lowered = min(base + thread_priority.LOW_NICE, 19)
    expected = lowered if len(os.sched_getaffinity(0)) > 1 else base
    assert writer_nice(spawner, short_dir / "low", "--writer-priority", "low") == expected
    assert writer_nice(spawner, short_dir / "default") == base
