"""``dev.py`` for a newcomer: paths as the caller wrote them, a try-out that never stalls."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import sqlite3
from pathlib import Path

import pytest

from executor.config.risk_limits import RISK_ENV_VARS
from executor.recording.database import close_database, open_database
from tests.support.dev import (
    DEV_SCRIPT,
    DevServe,
    copied_checkout,
    require_dev_environment,
    run_dev,
)
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters, request_all, wait_until_accepting


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
    after the restart), and each run has a database of its own, the last run's kept aside."""
    checkout = copied_checkout(short_dir / "checkout")
    first = _tryout_run(checkout, short_dir, "first", [f"first-{n}" for n in range(12)])
    second = _tryout_run(checkout, short_dir, "second", [f"second-{n}" for n in range(8)])
    for run in (first, second):
        server, _ = exit_counters(run.stderr_lines())
        assert (server["refused_risk"], server["dispatch_errors"]) == (0, 0)
        assert any(line.startswith("dev.py: try-out risk limits") for line in run.stderr_lines())
    var = checkout.parent / "var"
    orders = _orders(var / "telemetry.previous.db") + _orders(var / "telemetry.db")
    expected = [f"first-{n}" for n in range(12)] + [f"second-{n}" for n in range(8)]
    assert sorted(cid for cid, _, _ in orders) == sorted(expected)  # fires overlap: any order
    assert {status for _, status, _ in orders} == {"filled"}
    assert len({order_id for _, _, order_id in orders if order_id}) == 20  # the fake's own ids
    assert any(
        "a fresh" in line and "telemetry.previous.db" in line for line in second.stderr_lines()
    )


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
    spec = importlib.util.spec_from_file_location("dev_script", DEV_SCRIPT)
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    assert set(dev.TRYOUT_RISK_LIMITS) == set(RISK_ENV_VARS.values())
