"""``dev.py`` for a newcomer: paths as the caller wrote them, a try-out that never stalls."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from executor.config.risk_limits import RISK_ENV_VARS
from executor.recording.database import close_database, open_database
from tests.service.test_reconcile_restart import listed_orders
from tests.support.dev import (
    DevServe,
    copied_checkout,
    dev_module,
    require_dev_environment,
    run_dev,
)
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters, request_all, wait_until_accepting
from tests.support.standalone_fake import demo_env_file, standalone_fake


@pytest.fixture
def caller_dir(short_dir: Path) -> Path:
    """The caller's working directory, holding a telemetry file named relatively as ``rel.db``."""
    require_dev_environment()
    connection, _ = open_database(short_dir / "rel.db")
    close_database(connection, short_dir / "rel.db")
    return short_dir


@pytest.mark.parametrize(("command", "expected"), [("stats", "no rows"), ("orders", "no orders")])
def test_a_relative_database_is_read_from_the_callers_directory(
    caller_dir: Path, command: str, expected: str
) -> None:
    """``dev.py stats|orders --telemetry-db rel.db`` reads ``rel.db`` where the caller is, not in
    the checkout."""
    ran = run_dev(command, "--telemetry-db", "rel.db", cwd=caller_dir)
    assert ran.returncode == 0, ran.stderr
    assert expected in ran.stdout


def test_a_relative_plot_lands_in_the_callers_directory(caller_dir: Path) -> None:
    """``dev.py stats --plot y.png`` writes ``y.png`` where the caller is."""
    pytest.importorskip("matplotlib")
    ran = run_dev("stats", "--telemetry-db", "rel.db", "--plot", "y.png", cwd=caller_dir)
    assert ran.returncode == 0, ran.stderr
    assert (caller_dir / "y.png").stat().st_size > 0
    assert not (Path(__file__).resolve().parents[2] / "y.png").exists()


# ---------------------------------------------------------------- the try-out


def _orders(db_path: Path) -> list[tuple[str, str, str | None]]:
    """(correlation_id, status, kalshi_order_id) of every order row, oldest first."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return db.execute(
            "SELECT correlation_id, status, kalshi_order_id FROM orders_fired ORDER BY id"
        ).fetchall()


def _tryout_run(checkout: Path, directory: Path, name: str, wakes: list[str]) -> DevServe:
    """``dev.py serve`` as a newcomer starts it (only a socket of the test's own), the ``wakes``
    sent one after the other, then SIGTERM."""
    socket_path = directory / "x.sock"
    process = DevServe(directory, "--socket", socket_path, script=checkout, name=name)
    try:
        wait_until_accepting(process, socket_path)
        acks = request_all(socket_path, [make_wake(cid, exchange_index=0) for cid in wakes])
        assert [ack.status for ack in acks] == ["accepted"] * len(wakes)
        process.signal(signal.SIGTERM)
        assert process.wait() == 0
    finally:
        process.kill()
    return process


def test_a_newcomers_first_twenty_orders_all_reach_the_fake(short_dir: Path) -> None:
    """Twenty real wakes on one market, back to back, over two runs of ``dev.py serve`` with its
    defaults: every one is an order the fake filled (none refused by the risk gate, in the run or
    after the restart), all in the try-out's one database, kept across the restart."""
    checkout = copied_checkout(short_dir / "checkout")
    first = _tryout_run(checkout, short_dir, "first", [f"first-{n}" for n in range(12)])
    second = _tryout_run(checkout, short_dir, "second", [f"second-{n}" for n in range(8)])
    for run in (first, second):
        server, _ = exit_counters(run.stderr_lines())
        assert (server["refused_risk"], server["dispatch_errors"]) == (0, 0)
        assert any(line.startswith("dev.py: try-out risk limits") for line in run.stderr_lines())
    var = checkout.parent / "var"
    orders = _orders(var / "try-out.db")
    expected = [f"first-{n}" for n in range(12)] + [f"second-{n}" for n in range(8)]
    assert sorted(cid for cid, _, _ in orders) == sorted(expected)  # fires overlap: any order
    assert {status for _, status, _ in orders} == {"filled"}
    assert len({order_id for _, _, order_id in orders if order_id}) == 20  # the fake's own ids
    assert sorted(path.name for path in var.iterdir() if "previous" in path.name) == []
    assert not (var / "telemetry.db").exists()  # a try-out never touches the executor's own


INTENT_WAIT_S = 20.0
"""Longest wait for a wake's order intent to reach the journal (seconds, a busy machine)."""


def _wait_for_intent(journal: Path, process: DevServe) -> None:
    """Until ``journal`` holds a record: the order's intent is journaled before it is sent."""
    deadline = time.monotonic() + INTENT_WAIT_S
    while not journal.exists() or journal.stat().st_size == 0:
        assert time.monotonic() < deadline, process.stderr()
        time.sleep(0.02)


def _start_and_stop(checkout: Path, directory: Path, name: str, *args: str) -> DevServe:
    """``dev.py serve ARGS`` on ``directory/x.sock`` until it serves, then SIGTERM: exit 0."""
    socket_path = directory / "x.sock"
    process = DevServe(directory, *args, "--socket", socket_path, script=checkout, name=name)
    try:
        wait_until_accepting(process, socket_path)
        process.signal(signal.SIGTERM)
        assert process.wait() == 0
    finally:
        process.kill()
    return process


def _names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_fresh_moves_a_killed_tryout_aside_with_its_journal(short_dir: Path) -> None:
    """After a SIGKILL, ``dev.py serve --fresh`` moves the try-out's database aside as one unit
    (``-wal``, ``-shm`` and the intent journal beside it, renamed alike) and the run starts on an
    empty one; without ``--fresh`` nothing is moved."""
    checkout = copied_checkout(short_dir / "checkout")
    var = checkout.parent / "var"
    socket_path = short_dir / "x.sock"
    killed = DevServe(short_dir, "--socket", socket_path, script=checkout, name="killed")
    try:
        wait_until_accepting(killed, socket_path)
        acks = request_all(socket_path, [make_wake("before-kill", exchange_index=0)])
        assert [ack.status for ack in acks] == ["accepted"]
        _wait_for_intent(var / "try-out.db-intents", killed)
    finally:
        killed.kill()  # SIGKILL: the database, its -wal/-shm and its journal stay as they are
    left = _names(var)
    assert {"try-out.db", "try-out.db-intents", "try-out.db-wal", "try-out.db-shm"} <= set(left)
    fresh = _start_and_stop(checkout, short_dir, "fresh", "--fresh")
    moved = sorted(name.replace("try-out.db", "try-out.previous.db") for name in left)
    left_journal = "try-out.previous.db-intents"
    assert [name for name in _names(var) if "previous" in name] == moved
    assert _orders(var / "try-out.db") == []
    # The killed run's order went with its database: in its rows, or in the journal beside it.
    recorded = [cid for cid, _, _ in _orders(var / "try-out.previous.db")]
    assert recorded == ["before-kill"] or b"before-kill" in (var / left_journal).read_bytes()
    assert any("a fresh" in line and "with its journal" in line for line in fresh.stderr_lines())


def test_serve_help_changes_nothing_on_disk(short_dir: Path) -> None:
    """``dev.py serve --help`` (with ``--fresh`` too) prints the help and leaves every file of
    ``var/`` as it was."""
    checkout = copied_checkout(short_dir / "checkout")
    var = checkout.parent / "var"
    var.mkdir()
    for name in ("telemetry.db", "telemetry.db-intents", "try-out.db", "try-out.db-intents"):
        connection, _ = open_database(var / name) if name.endswith(".db") else (None, False)
        if connection is not None:
            close_database(connection, var / name)
        else:
            (var / name).write_bytes(b"")
    before = {path.name: path.stat().st_mtime_ns for path in var.iterdir()}
    for args in (("--help",), ("--fresh", "--help"), ("--exchange", "auto", "-h")):
        ran = run_dev("serve", *args, cwd=short_dir, script=checkout)
        assert ran.returncode == 0, ran.stderr
        assert "--telemetry-db" in ran.stdout
        assert {path.name: path.stat().st_mtime_ns for path in var.iterdir()} == before


def test_fresh_is_refused_outside_a_tryout(short_dir: Path) -> None:
    """``--fresh`` with a real exchange (the executor's own database, never moved) is one line
    and exit 1, and the database is left where it is."""
    checkout = copied_checkout(short_dir / "checkout")
    var = checkout.parent / "var"
    var.mkdir()
    connection, _ = open_database(var / "telemetry.db")
    close_database(connection, var / "telemetry.db")
    ran = run_dev(
        "serve",
        "--fresh",
        "--exchange",
        "auto",
        "--socket",
        short_dir / "x.sock",
        cwd=short_dir,
        script=checkout,
    )
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines() == [
        "dev.py: --fresh starts a try-out's database afresh; with a real exchange the database "
        "is the executor's own and is never moved (name another with --telemetry-db)"
    ]
    assert _names(var) == ["telemetry.db"]


def test_an_explicit_fake_is_a_tryout_too(short_dir: Path) -> None:
    """``dev.py serve --exchange fake`` records in the try-out's file, never in the one a real
    exchange's orders go to, and keeps the production limits (no try-out limits said)."""
    checkout = copied_checkout(short_dir / "checkout")
    var = checkout.parent / "var"
    process = _start_and_stop(checkout, short_dir, "explicit", "--exchange", "fake")
    assert "try-out.db" in _names(var)
    assert "telemetry.db" not in _names(var)
    assert not any(
        line.startswith("dev.py: try-out risk limits") for line in process.stderr_lines()
    )


def test_a_demo_serve_keeps_one_database_through_a_sigkill(short_dir: Path) -> None:
    """The issue's case: ``dev.py serve --exchange auto --env-file demo.env`` (the stand-alone
    fake playing the demo exchange) killed while an order's answer is held, then started again
    the same way: the journal replays into the same var/telemetry.db, the order (on the
    exchange's book before the kill) is found filled there, and nothing was moved aside."""
    checkout = copied_checkout(short_dir / "checkout")
    var = checkout.parent / "var"
    socket_path = short_dir / "x.sock"
    with standalone_fake(short_dir / "fake", "--fault", "hang-after-place") as world:
        env_file = demo_env_file(short_dir / "demo.env", world)
        args = ("--exchange", "auto", "--env-file", env_file, "--socket", socket_path)
        first = DevServe(short_dir, *args, script=checkout, name="first")
        try:
            wait_until_accepting(first, socket_path)
            acks = request_all(socket_path, [make_wake("held", exchange_index=0)])
            assert [ack.status for ack in acks] == ["accepted"]
            deadline = time.monotonic() + INTENT_WAIT_S
            while not listed_orders(world, make_wake("held").market_ticker):  # on the book
                assert time.monotonic() < deadline, first.stderr()
                time.sleep(0.02)
        finally:
            first.kill()
        second = DevServe(short_dir, *args, script=checkout, name="second")
        try:
            wait_until_accepting(second, socket_path)  # start-up has reconciled by now
            second.signal(signal.SIGTERM)
            assert second.wait() == 0
        finally:
            second.kill()
    ((cid, status, order_id),) = _orders(var / "telemetry.db")
    assert (cid, status) == ("held", "filled") and order_id
    assert not [path for path in var.iterdir() if "previous" in path.name or "try-out" in path.name]


def test_the_executor_itself_keeps_the_production_limits(spawner: Spawner, short_dir: Path) -> None:
    """The twin: ``executor serve --exchange fake`` without dev.py keeps the production defaults,
    so a second wake on the same market within the cooldown is refused by the risk gate."""
    socket_path = short_dir / "x.sock"
    executor = spawner.serve(socket_path, short_dir / "t.db", "--exchange", "fake")
    wakes = [make_wake(cid, exchange_index=0) for cid in ("prod-1", "prod-2")]
    assert [ack.status for ack in request_all(socket_path, wakes)] == ["accepted"] * 2
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    statuses = [status for _, status, _ in _orders(short_dir / "t.db")]
    assert statuses == ["filled", "rejected"]
    server, _ = exit_counters(executor.stderr_lines())
    assert server["refused_risk"] == 1


def test_the_tryout_limits_are_variables_the_executor_reads() -> None:
    """Every variable dev.py sets for a try-out is a risk limit the executor knows (a renamed
    variable would otherwise be warned about and silently not apply)."""
    assert set(dev_module().TRYOUT_RISK_LIMITS) == set(RISK_ENV_VARS.values())
