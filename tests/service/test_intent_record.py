"""An order killed in the writer's linger window still ends in its row (issue 21, item 1).

Real processes: the stand-alone fake exchange (it outlives the executor) places the order and
holds its answer (``hang-after-place``, the restart test's fake); the executor commits its rows
only after a 5 s linger (``--telemetry-linger 5``), so when it is
SIGKILLed right after the fake has the order, neither the pending row nor the resolution has
reached SQLite: only the intent journal knows the order. The restart on the same database replays
it and asks the exchange, before its socket accepts.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from executor.recording.orders.intent_journal import journal_path, read_journal
from executor.recording.orders.terms import RECONCILED_PREFIX
from tests.service.test_reconcile_restart import fake_world, listed_orders, order_rows, real_mode
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters, request_all

__all__ = ["fake_world", "real_mode"]  # fixtures shared with the restart test

WAIT_S = 10.0
"""Longest wait for the order to reach the fake (seconds, a loaded two-core machine)."""

LINGER_S = "5"
"""The writer's linger here (seconds): far longer than it takes to kill the executor once the
fake has the order, so the rows are certainly still in memory when it dies."""


def test_an_order_killed_before_its_rows_were_committed_has_its_row_after_the_restart(
    spawner: Spawner, short_dir: Path, fake_world: dict[str, str], real_mode: None
) -> None:
    """SIGKILL after the exchange has the order and before any of its rows was committed: the
    restarted executor has exactly one row for it, ``filled`` with the exchange's id, by the
    time its socket accepts; the journal is empty again."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    wake = make_wake("killed-in-the-linger", exchange_index=0)
    first = spawner.serve(socket_path, db_path, "--telemetry-linger", LINGER_S)
    assert request_all(socket_path, [wake])[0].status == "accepted"
    deadline = time.monotonic() + WAIT_S
    while not listed_orders(fake_world, wake.market_ticker):
        assert time.monotonic() < deadline, first.stderr()
        time.sleep(0.01)
    first.process.kill()
    first.wait()
    assert order_rows(db_path) == []  # the linger held every row: the window of item 1
    (intent,) = read_journal(journal_path(db_path)).rows
    assert (intent.status, intent.correlation_id) == ("pending", "killed-in-the-linger")

    second = spawner.serve(socket_path, db_path)
    ((client_order_id, status, kalshi_order_id, fill_count, message),) = order_rows(db_path)
    (listed,) = listed_orders(fake_world, wake.market_ticker)
    assert client_order_id == listed["client_order_id"] == intent.client_order_id
    assert (status, kalshi_order_id, fill_count) == ("filled", listed["order_id"], "1.00")
    assert message == RECONCILED_PREFIX + "left pending by an earlier run"
    second.signal(signal.SIGTERM)
    assert second.wait() == 0
    _, telemetry = exit_counters(second.stderr_lines())
    assert (telemetry["journal_replayed"], telemetry["journal_torn"]) == (1, 0)
    assert read_journal(journal_path(db_path)).rows == []
