"""An executor killed between sending an order and recording its outcome: the restart asks the
exchange and corrects the row before its socket is published.

Real processes: the stand-alone fake (``python -m executor.fake``, so it outlives the executor)
holds the order's answer (``--fault hang-after-place``), the executor is SIGKILLed while the order
is in flight, and a second executor starts on the same database.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from executor.exchange.orders.transport import ORDERS_PATH, ExchangeEndpoint, open_exchange
from executor.recording.orders.terms import RECONCILED_PREFIX
from executor.signer import KalshiSigner
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters, request_all
from tests.support.standalone_fake import standalone_fake, trade_against

WAIT_S = 10.0
"""Longest wait for the order to show up in the database and on the fake."""


@pytest.fixture
def fake_world(short_dir: Path) -> Iterator[dict[str, str]]:
    """A stand-alone fake exchange that places the first order and never answers it."""
    with standalone_fake(short_dir / "fake", "--fault", "hang-after-place") as world:
        yield world


@pytest.fixture
def real_mode(fake_world: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Children trade against the stand-alone fake, one contract an order."""
    trade_against(fake_world, monkeypatch)


def listed_orders(world: dict[str, str], ticker: str) -> list[dict[str, Any]]:
    """The fake's orders on ``ticker``, asked the way the executor asks (signed, paged)."""

    async def ask() -> list[dict[str, Any]]:
        signer = KalshiSigner(Path(world["private_key_path"]), world["key_id"])
        endpoint = ExchangeEndpoint(
            world["base_url"], world["key_id"], signer, Path(world["ca_file"])
        )
        orders: list[dict[str, Any]] = []
        params = {"ticker": ticker}
        async with open_exchange(endpoint, prewarm=False) as client:
            while True:
                page = await client.get_json(ORDERS_PATH, params)
                orders.extend(page["orders"])
                if not page["cursor"]:
                    return orders
                params = {**params, "cursor": page["cursor"]}

    return trio.run(ask)


def order_rows(db_path: Path) -> list[tuple[Any, ...]]:
    """``(client_order_id, status, kalshi_order_id, fill_count, error_message)`` of each row."""
    if not db_path.exists():
        return []
    read_only = f"{db_path.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(read_only, uri=True)) as db, db:
        try:
            rows = db.execute(
                "SELECT client_order_id, status, kalshi_order_id, fill_count, error_message"
                " FROM orders_fired ORDER BY id"
            ).fetchall()
        except sqlite3.OperationalError:  # the table is not there yet
            rows = []
    return rows


def test_a_killed_in_flight_order_is_resolved_before_the_restart_serves(
    spawner: Spawner, short_dir: Path, fake_world: dict[str, str], real_mode: None
) -> None:
    """SIGKILL while the fake holds the answer leaves a ``pending`` row; the restarted executor
    has it ``filled``, with the exchange's id, by the time its socket accepts, and the order
    was placed once."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    wake = make_wake("killed-in-flight", exchange_index=0)
    first = spawner.serve(socket_path, db_path)
    assert request_all(socket_path, [wake])[0].status == "accepted"
    deadline = time.monotonic() + WAIT_S
    while not (order_rows(db_path) and listed_orders(fake_world, wake.market_ticker)):
        assert time.monotonic() < deadline, first.stderr()
        time.sleep(0.02)
    first.process.kill()
    first.wait()
    ((client_order_id, status, kalshi_order_id, _, _),) = order_rows(db_path)
    assert (status, kalshi_order_id) == ("pending", None)

    second = spawner.serve(socket_path, db_path)  # returns once the socket accepts
    ((same_id, status, kalshi_order_id, fill_count, message),) = order_rows(db_path)
    (listed,) = listed_orders(fake_world, wake.market_ticker)
    assert same_id == client_order_id == listed["client_order_id"]
    assert (status, kalshi_order_id, fill_count) == ("filled", listed["order_id"], "1.00")
    assert message == RECONCILED_PREFIX + "left pending by an earlier run"
    second.signal(signal.SIGTERM)
    assert second.wait() == 0
    server, _ = exit_counters(second.stderr_lines())
    assert (server["reconciled"], server["reconcile_failed"]) == (1, 0)
    stderr = second.stderr()
    assert "start-up reconciliation" in stderr and "Traceback" not in stderr
    (summary,) = [
        json.loads(line) for line in stderr.splitlines() if "start-up reconciliation" in line
    ]
    assert (summary["orders"], summary["filled"], summary["absent"]) == (1, 1, 0)
