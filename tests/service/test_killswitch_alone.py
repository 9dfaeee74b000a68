"""``executor killswitch engage --telemetry-db D`` run alone cancels a dead executor's book.

Real processes: the stand-alone fake (it outlives the executor), an executor that rests three
good_till_canceled orders and is SIGKILLed, then the command, with the same ``KALSHI_*``
variables as the executor had.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from executor.exchange.messages import OrderStamps, order_body
from executor.exchange.orders.transport import ExchangeEndpoint, ExchangeError, open_exchange
from executor.signer import KalshiSigner
from tests.service.test_reconcile_restart import listed_orders, order_rows
from tests.support.inprocess import make_wake
from tests.support.orders import spec
from tests.support.processes import Spawner, assert_one_line_failure, request_all
from tests.support.standalone_fake import standalone_fake, trade_against

WAIT_S = 20.0
"""Longest wait for the orders to rest on the fake and in the rows (seconds, a loaded machine)."""

TICKERS = ("KXKILL-26JAN01-T1", "KXKILL-26JAN01-T2", "KXKILL-26JAN01-T3")


@pytest.fixture
def fake_world(short_dir: Path) -> Iterator[dict[str, str]]:
    """A stand-alone fake exchange (``python -m executor.fake``), stopped after the test."""
    with standalone_fake(short_dir / "fake") as world:
        yield world


@pytest.fixture
def resting_mode(fake_world: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Children trade good_till_canceled orders of one contract against the fake, ungated."""
    trade_against(
        fake_world,
        monkeypatch,
        KALSHI_RISK_GATE_ENABLED="false",
        KALSHI_ORDER_TIME_IN_FORCE="good_till_canceled",
    )


def resting_on_the_fake(world: dict[str, str]) -> int:
    """Orders resting on the fake across the three markets."""
    return sum(
        order["status"] == "resting" for ticker in TICKERS for order in listed_orders(world, ticker)
    )


def group_ids(db_path: Path) -> list[str]:
    """The order groups the database records."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        found = [row[0] for row in db.execute("SELECT order_group_id FROM order_groups")]
    return found


def place_in_group(world: dict[str, str], group_id: str) -> dict[str, Any]:
    """One signed order of the group, straight to the fake (raises when refused)."""

    async def place() -> dict[str, Any]:
        signer = KalshiSigner(Path(world["private_key_path"]), world["key_id"])
        endpoint = ExchangeEndpoint(
            world["base_url"], world["key_id"], signer, Path(world["ca_file"])
        )
        async with open_exchange(endpoint, prewarm=False) as client:
            body = order_body(spec("z" * 32, order_group_id=group_id))
            return await client.place_order(body, OrderStamps(), dry_run=False)

    return trio.run(place)


def test_engage_alone_cancels_a_killed_executors_resting_orders(
    spawner: Spawner, short_dir: Path, fake_world: dict[str, str], resting_mode: None
) -> None:
    """Three orders rest, the executor is SIGKILLed; engage without --telemetry-db only writes
    the switch (the three still rest: the negative twin); with it, none rests on the fake, the
    three rows say canceled, and the executor's group refuses a new order."""
    socket_path, db_path, halt = short_dir / "x.sock", short_dir / "t.db", short_dir / "halt"
    executor = spawner.serve(socket_path, db_path, "--kill-switch", halt)
    wakes = [
        make_wake(f"rest-{index}", exchange_index=0, market_ticker=ticker)
        for index, ticker in enumerate(TICKERS)
    ]
    assert [ack.status for ack in request_all(socket_path, wakes)] == ["accepted"] * 3
    deadline = time.monotonic() + WAIT_S
    while [row[1] for row in order_rows(db_path)] != ["accepted"] * 3:
        assert time.monotonic() < deadline, executor.stderr()
        time.sleep(0.05)
    executor.process.kill()
    executor.wait()
    assert resting_on_the_fake(fake_world) == 3

    file_only = spawner.run("killswitch", "--kill-switch", halt, "engage", "host", "lost")
    assert (file_only.returncode, file_only.stdout) == (0, "engaged: host lost\n")
    assert resting_on_the_fake(fake_world) == 3

    engaged = spawner.run(
        "killswitch", "--kill-switch", halt, "--telemetry-db", db_path, "engage", "host", "lost"
    )
    assert engaged.returncode == 0, engaged.stderr
    assert "engaged: host lost" in engaged.stdout
    assert "3 of 3 resting orders cancelled" in engaged.stdout
    (group_id,) = group_ids(db_path)
    assert f"order group {group_id} triggered" in engaged.stdout
    assert resting_on_the_fake(fake_world) == 0
    assert [row[1] for row in order_rows(db_path)] == ["canceled"] * 3
    with pytest.raises(ExchangeError, match="order_group_triggered"):
        place_in_group(fake_world, group_id)


def test_engage_with_a_database_but_no_credentials_is_one_line_and_changes_nothing(
    spawner: Spawner, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked to cancel through the exchange with no exchange configured: exit 1, one line that
    says what is missing, and the switch file is not written."""
    for name in list(os.environ):
        if name.startswith("KALSHI_"):
            monkeypatch.delenv(name)
    halt = short_dir / "halt"
    run = spawner.run(
        "killswitch", "--kill-switch", halt, "--telemetry-db", short_dir / "t.db", "engage"
    )
    assert_one_line_failure(run, "no exchange is configured")
    assert run.returncode == 1
    assert not halt.exists()


@pytest.mark.parametrize("command", ["status", "release"])
def test_only_engage_takes_the_database(spawner: Spawner, short_dir: Path, command: str) -> None:
    """status or release with --telemetry-db is bad usage (exit 1, one line), never a silent
    half: release does not reset a dead executor's group (the next start makes a new one)."""
    halt, db_path = short_dir / "halt", short_dir / "t.db"
    run = spawner.run("killswitch", "--kill-switch", halt, "--telemetry-db", db_path, command)
    assert_one_line_failure(run, "only engage acts on the exchange")
    assert run.returncode == 1
