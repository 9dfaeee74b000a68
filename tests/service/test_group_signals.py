"""A signal to the executor's whole process group is the same orderly shutdown as one to it alone.

A terminal's Ctrl-C, ``kill -TERM -- -PGID`` and systemd's ``KillMode=control-group`` signal every
process of the group, the shadow-signing worker included. The executor runs in its own session
here (``start_new_session``), trading against a fake exchange served by this test (real mode, over
TLS) that holds the order's answer for a while, so the signal lands with the order in flight.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
import trio

from executor.fake.exchange import ORDER_PATH, FakeCredentials, FakeExchange, Fault
from tests.support.inprocess import make_wake
from tests.support.processes import executor_command, exit_counters, request_all

ANSWER_DELAY_S = 1.5
"""How long the fake holds the order's answer (seconds): well inside the 5 s grace, long enough
that the signal is sent while the order is in flight."""

WAIT_S = 60.0
"""Bound on each wait (start-up, the order's arrival, the exit) on a loaded two-core machine."""


def group_members(pgid: int) -> list[int]:
    """The pids whose process group is ``pgid`` (read from /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(entry.name))
    return members


def trading_environment(exchange: FakeExchange, credentials: FakeCredentials) -> dict[str, str]:
    """This process's environment without stray KALSHI_* settings, pointed at ``exchange``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("KALSHI_")}
    env.update(
        KALSHI_API_KEY_ID=credentials.key_id,
        KALSHI_PRIVATE_KEY_PATH=str(credentials.private_key_path),
        KALSHI_DEMO_BASE_URL=exchange.base_url,
        KALSHI_CA_FILE=str(credentials.ca_file),
        KALSHI_ALLOWED_EXCHANGE_INDEXES="0",
    )
    return env


async def _accepting(socket_path: Path, process: trio.Process) -> None:
    while True:
        assert process.poll() is None, "the executor exited during start-up"
        probe = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        try:
            await probe.connect(os.fspath(socket_path))
        except (FileNotFoundError, ConnectionRefusedError):
            await trio.sleep(0.02)
        else:
            return
        finally:
            probe.close()


async def _order_arrived(exchange: FakeExchange) -> None:
    while not any(request.path == ORDER_PATH for request in exchange.received):  # noqa: ASYNC110
        await trio.sleep(0.01)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_to_the_whole_group_is_an_orderly_exit(
    signum: signal.Signals,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    short_dir: Path,
) -> None:
    """os.killpg with the order in flight and the signing worker in the group: exit 0, both
    counter lines balanced, no traceback, and the order's row resolved as filled."""
    fake_exchange.balance_cents = 10_000  # sizes the sample wake to 3 contracts
    fake_exchange.inject(Fault("latency", seconds=ANSWER_DELAY_S))
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    with (short_dir / "stderr.txt").open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            executor_command("serve", "--socket", socket_path, "--telemetry-db", db_path),
            env=trading_environment(fake_exchange, fake_credentials),
            cwd=short_dir,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        with trio.fail_after(WAIT_S):
            await _accepting(socket_path, process)
            acks = await trio.to_thread.run_sync(
                request_all,
                socket_path,
                [
                    make_wake("real-1", exchange_index=0),
                    make_wake("shadow-1", exchange_index=0, dry_run=True),
                ],
            )
            assert [ack.status for ack in acks] == ["accepted", "accepted"]
            with trio.move_on_after(WAIT_S / 2) as waiting:
                await _order_arrived(fake_exchange)
            if waiting.cancelled_caught:
                pytest.fail("no order reached the fake:\n" + (short_dir / "stderr.txt").read_text())
            workers = [pid for pid in group_members(process.pid) if _is_worker(pid)]
            assert workers, "the signing worker should share the executor's process group"
            os.killpg(process.pid, signum)
            status = await process.wait()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    output = (short_dir / "stderr.txt").read_text(errors="replace")
    assert status == 0, output[-3000:]
    assert "Traceback" not in output
    assert "shadow signing worker" not in output  # it ignored the signal: no death, no warning
    lines = [line for line in output.splitlines() if line.strip()]
    server, telemetry = exit_counters(lines)
    refused = sum(value for key, value in server.items() if key.startswith("refused_"))
    assert server["fired"] == 2
    assert server["accepted"] - server["unacked"] == server["fired"] + refused
    assert (server["fires_cancelled"], server["fire_errors"]) == (0, 0)
    assert telemetry["order_rows_dropped"] == 0
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        rows = db.execute("SELECT correlation_id, status FROM orders_fired").fetchall()
    assert rows == [("real-1", "filled")]
    assert [pid for pid in workers if not _exited(pid)] == []  # the executor stopped its worker


def _is_worker(pid: int) -> bool:
    """Whether ``pid`` is a trio-parallel worker (a multiprocessing spawn child; the group's
    other child, multiprocessing's resource tracker, exits by itself once the executor is gone)."""
    try:
        return b"spawn_main" in (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except FileNotFoundError:
        return False


def _exited(pid: int) -> bool:
    """Whether ``pid`` is gone (the executor stopped the worker it started)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_group_signal_with_the_in_process_fake_is_an_orderly_exit(
    signum: signal.Signals, short_dir: Path
) -> None:
    """``serve --exchange fake`` signalled as a group the moment a real wake is acked (its order
    in flight or just answered): exit 0, counters balanced, no traceback, the row filled."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    env = {name: value for name, value in os.environ.items() if not name.startswith("KALSHI_")}
    with (short_dir / "stderr.txt").open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            executor_command(
                "serve", "--socket", socket_path, "--telemetry-db", db_path, "--exchange", "fake"
            ),
            env=env,
            cwd=short_dir,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        with trio.fail_after(WAIT_S):
            await _accepting(socket_path, process)
            workers = [pid for pid in group_members(process.pid) if _is_worker(pid)]
            acks = await trio.to_thread.run_sync(
                request_all, socket_path, [make_wake("real-1", exchange_index=0)]
            )
            os.killpg(process.pid, signum)
            status = await process.wait()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    output = (short_dir / "stderr.txt").read_text(errors="replace")
    assert [ack.status for ack in acks] == ["accepted"]
    assert workers, "the signing worker should share the executor's process group"
    assert status == 0, output[-3000:]
    assert "Traceback" not in output and "shadow signing worker" not in output
    server, telemetry = exit_counters([line for line in output.splitlines() if line.strip()])
    refused = sum(value for key, value in server.items() if key.startswith("refused_"))
    assert server["accepted"] - server["unacked"] == server["fired"] + refused == 1
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        rows = db.execute("SELECT correlation_id, status FROM orders_fired").fetchall()
    assert rows == [("real-1", "filled")]
    assert telemetry["order_rows_dropped"] == 0
