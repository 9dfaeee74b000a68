"""Start-up adopts what the exchange has from this installation and the table lacks, before the
socket accepts, and the risk gate's warm start counts it.

Real processes: the stand-alone fake exchange holds an order with this installation's prefix that
no row records (an earlier run lost it) and another client's order on the same ticker; an
executor starts on the database. The risk gate's hold of the adopted fill is read in-process.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from executor.clock import wall_ms
from executor.decide.risk import RiskLimits
from executor.exchange.follow.adoption import ADOPTED_MESSAGE
from executor.exchange.messages import OrderStamps, order_body
from executor.exchange.orders.transport import ExchangeEndpoint, open_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.database import close_database, open_database
from executor.recording.orders.installation import load_installation
from executor.signer import KalshiSigner
from tests.exchange.test_adoption import fresh_db, put_on_book
from tests.service.test_book_guard_again import fail_first
from tests.service.test_fire_e2e import settings_for, start_trading
from tests.service.test_reconcile_restart import order_rows, real_mode
from tests.support.orders import TICKER, spec
from tests.support.processes import Spawner, exit_counters
from tests.support.standalone_fake import standalone_fake

__all__ = ["real_mode"]  # the fixture shared with the restart test


@pytest.fixture
def fake_world(short_dir: Path) -> Iterator[dict[str, str]]:
    """A stand-alone fake exchange without faults (``real_mode`` points children at it)."""
    with standalone_fake(short_dir / "fake") as world:
        yield world


def place(world: dict[str, str], *client_order_ids: str) -> list[str]:
    """Send orders to the fake as some client would; their exchange order ids."""

    async def send() -> list[str]:
        signer = KalshiSigner(Path(world["private_key_path"]), world["key_id"])
        endpoint = ExchangeEndpoint(
            world["base_url"], world["key_id"], signer, Path(world["ca_file"])
        )
        placed = []
        async with open_exchange(endpoint, prewarm=False) as client:
            for client_order_id in client_order_ids:
                body = order_body(spec(client_order_id, count=1))
                response = await client.place_order(body, OrderStamps(), dry_run=False)
                placed.append(str(response["order_id"]))
        return placed

    return trio.run(send)


def test_start_up_adopts_our_order_without_a_row_and_leaves_another_clients_alone(
    spawner: Spawner, short_dir: Path, fake_world: dict[str, str], real_mode: None
) -> None:
    """Our lost order gets a row (filled, the exchange's id, "adopted from the exchange: no
    local record") before the socket accepts; the other client's order gets none; the exit line
    counts one adoption and the warm start one past order."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    connection, _ = open_database(db_path)
    close_database(connection, db_path)
    installation = load_installation(db_path, wall_ms())  # an earlier run of this installation
    ours = installation.ids.mint()
    ours_id, _ = place(fake_world, ours, uuid.uuid4().hex)

    executor = spawner.serve(socket_path, db_path)
    ((client_order_id, status, kalshi_order_id, fill_count, message),) = order_rows(db_path)
    assert (client_order_id, status, kalshi_order_id) == (ours, "filled", ours_id)
    assert (fill_count, message) == ("1.00", ADOPTED_MESSAGE)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    server, _ = exit_counters(executor.stderr_lines())
    assert server["adopted"] == 1
    lines = [json.loads(line) for line in executor.stderr_lines() if line.startswith("{")]
    (warm,) = [line for line in lines if line["event"] == "risk gate warm"]
    assert warm["past_orders"] == 1
    (adoption,) = [line for line in lines if line["event"] == "adoption pass"]
    assert (adoption["adopted"], adoption["foreign_orders"]) == (1, 1)


async def test_an_adopted_orders_fill_reaches_the_risk_gate_at_start_up(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An earlier run's order, 3 contracts filled, has no row, and the start-up account poll
    cannot read the positions: once serving, the risk gate holds the adopted 3 contracts on the
    ticker (one more would break a 3-contract limit), learned from the adopted row."""
    db_path = fresh_db(short_dir / "t.db")
    installation = load_installation(db_path, wall_ms() - 60_000)  # an earlier run's start
    put_on_book(fake_exchange, installation.ids.mint())
    polls = fail_first(fake_exchange, monkeypatch, "/portfolio/positions")  # start-up's poll
    limits = RiskLimits(max_position_contracts_per_ticker=3)
    settings = settings_for(fake_exchange, fake_credentials, risk_limits=limits)
    running = await start_trading(
        nursery, short_dir, fake_exchange, fake_credentials, settings=settings
    )
    orders = running.server._fire_path.orders
    assert orders is not None and orders.risk is not None
    refusal = orders.risk.check(TICKER, "no", 0, 1, 0.42, wall_ms(), "")
    await running.shutdown()
    assert polls == [503]  # the gate had no positions from the exchange
    assert [row[3] for row in order_rows(db_path)] == ["3.00"]
    assert refusal == f"position on {TICKER} would reach 4 contracts (max 3)"
