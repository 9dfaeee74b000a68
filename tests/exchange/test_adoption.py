"""Adoption: the exchange's orders of this installation that have no row get one; other clients'
orders, orders with a row and orders in flight are left alone.

Over TLS against the in-process fake; the orders are put on its book directly (as an earlier run
or another client would have sent them), and the table is a real telemetry database.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

import trio
import trio.testing
from structlog.testing import capture_logs

from executor.clock import wall_ms
from executor.exchange.follow.adoption import (
    ADOPTED_MESSAGE,
    ADOPTION_LOOKBACK_MAX_MS,
    Adopter,
    take_adopted,
)
from executor.exchange.follow.ledger_keeper import LedgerKeeper
from executor.exchange.follow.reconcile import CollectedRows
from executor.exchange.messages import order_body
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.audit_trail import AuditTransition
from executor.recording.database import close_database, open_database
from executor.recording.orders.installation import ClientOrderIds, load_installation
from executor.recording.orders.intent_journal import IntentJournal
from executor.recording.orders.open_orders import write_corrections
from executor.recording.orders.recent_orders import load_recent_orders
from executor.recording.rows import OrderRow, OrderStatus
from executor.recording.sqlite_writer import write_batch
from tests.support.orders import TICKER, spec, transport
from tests.support.rows import order_row

IDS = ClientOrderIds("0badcafe")
"""The installation under test."""

DAY_MS = 24 * 3600 * 1000


def put_on_book(exchange: FakeExchange, client_order_id: str, **overrides: object) -> str:
    """Place an order on the fake's book as if it had been sent; its exchange order id."""
    return str(exchange.place_order(order_body(spec(client_order_id, **overrides)))["order_id"])


def place_at(exchange: FakeExchange, at_ms: int, client_order_id: str) -> None:
    """Place an order on the fake's book as the exchange saw it at ``at_ms`` (its created_time)."""
    exchange.clock = lambda: at_ms
    try:
        put_on_book(exchange, client_order_id)
    finally:
        exchange.clock = wall_ms


def adopter_for(
    client: object,
    db_path: Path,
    in_flight: Callable[[], Iterable[str]] = frozenset,
    *,
    since_ms: int | None = None,
) -> Adopter:
    """An adopter of ``IDS`` for a run starting now, fill_or_kill configured, looking back from
    ``since_ms`` (by default a minute ago)."""
    now_ms = wall_ms()
    return Adopter(
        client,  # type: ignore[arg-type]
        IDS,
        db_path,
        time_in_force="fill_or_kill",
        self_trade_prevention_type="taker_at_cross",
        run_started_ms=now_ms,
        adopt_since_ms=now_ms - 60_000 if since_ms is None else since_ms,
        in_flight=in_flight,
    )


def fresh_db(path: Path) -> Path:
    """A telemetry database with its tables and no rows."""
    connection, _ = open_database(path)
    close_database(connection, path)
    return path


async def test_only_our_orders_without_a_row_are_adopted(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """Of six orders on the book: our filled one and our resting one without rows are adopted
    with the exchange's status, fill and id and the adoption message; our order with a row and
    our order in flight are not; the two other clients' orders are counted and left alone."""
    db_path = fresh_db(short_dir / "t.db")
    filled, resting, recorded, flying = (IDS.mint() for _ in range(4))
    filled_id = put_on_book(fake_exchange, filled)
    resting_id = put_on_book(fake_exchange, resting, time_in_force="good_till_canceled", side="ask")
    put_on_book(fake_exchange, recorded)
    put_on_book(fake_exchange, flying)
    for _ in range(2):
        put_on_book(fake_exchange, uuid.uuid4().hex)  # another client on the same ticker
    connection, _ = open_database(db_path)
    write_batch(connection, [order_row(client_order_id=recorded)])
    close_database(connection, db_path)
    collected = CollectedRows()
    async with transport(fake_exchange, fake_credentials) as client:
        adopter = adopter_for(client, db_path, lambda: {flying})
        summary = await adopter.adopt(collected)
    assert summary is not None
    assert (summary.listed, summary.foreign) == (6, 2)
    assert (adopter.adopted, adopter.foreign_orders) == (2, 2)
    rows = {row.client_order_id: row for row in collected.rows}
    assert set(rows) == {filled, resting}
    assert (rows[filled].status, rows[filled].kalshi_order_id) == (OrderStatus.FILLED, filled_id)
    assert (rows[filled].fill_count, rows[filled].count, rows[filled].ticker) == (
        "3.00",
        "3.00",
        TICKER,
    )
    assert (rows[filled].outcome_side, rows[filled].price_dollars) == ("yes", "0.4200")
    assert rows[resting].status is OrderStatus.ACCEPTED
    assert (rows[resting].kalshi_order_id, rows[resting].outcome_side) == (resting_id, "no")
    assert rows[resting].remaining_count == "3.00"
    assert {row.error_message for row in rows.values()} == {ADOPTED_MESSAGE}


async def test_nothing_is_adopted_when_every_order_has_its_row(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """The negative twin: our orders all recorded, another client's listed: no row written."""
    db_path = fresh_db(short_dir / "t.db")
    ours = IDS.mint()
    put_on_book(fake_exchange, ours)
    put_on_book(fake_exchange, uuid.uuid4().hex)
    connection, _ = open_database(db_path)
    write_batch(connection, [order_row(client_order_id=ours)])
    close_database(connection, db_path)
    collected = CollectedRows()
    async with transport(fake_exchange, fake_credentials) as client:
        adopter = adopter_for(client, db_path)
        await adopter.adopt(collected)
    assert collected.rows == [] and adopter.adopted == 0 and adopter.foreign_orders == 1


async def test_adopted_rows_are_written_once_and_the_warm_start_reads_them(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """Committed, an adopted row is an attempt and a fill for the risk gate's warm start; a
    second pass finds the row and adopts nothing."""
    db_path = fresh_db(short_dir / "t.db")
    put_on_book(fake_exchange, IDS.mint())
    async with transport(fake_exchange, fake_credentials) as client:
        adopter = adopter_for(client, db_path)
        first = CollectedRows()
        await adopter.adopt(first)
        await trio.to_thread.run_sync(write_corrections, db_path, first.rows)
        second = CollectedRows()
        await adopter.adopt(second)
    assert (len(first.rows), second.rows) == (1, [])
    (past,) = load_recent_orders(db_path, wall_ms())
    assert (past.ticker, past.count, past.fill_count) == (TICKER, 3.0, 3.0)


def test_the_prefix_is_kept_with_the_database_and_minted_ids_are_32_hex(short_dir: Path) -> None:
    """The first load makes a prefix, later loads return the same one; every id minted with it
    is 32 lowercase hex digits starting with it, and is recognised as ours while another
    client's uuid4 hex is not."""
    db_path = fresh_db(short_dir / "t.db")
    first = load_installation(db_path, 1_000)
    again = load_installation(db_path, 2_000)
    assert first.created and not again.created
    assert again.prefix == first.prefix and again.adopt_since_ms == 1_000
    minted = {first.ids.mint() for _ in range(100)}
    assert len(minted) == 100
    assert all(len(i) == 32 and i == i.lower() and i.startswith(first.prefix) for i in minted)
    assert all(first.ids.is_ours(i) for i in minted)
    assert not first.ids.is_ours(uuid.uuid4().hex)
    assert not first.ids.is_ours(first.prefix + "x" * 24)


async def test_a_restart_days_after_a_long_run_adopts_the_orphan_near_its_end(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """The last run began 5 days ago and was killed 3 days ago with an order that has no row;
    the restart today lists from the last run's start less the clocks' minute: that orphan and
    one sent 30 s before the recorded start are adopted, one from 2 minutes before it (an
    earlier run's, already checked) is not looked for."""
    db_path = fresh_db(short_dir / "t.db")
    now_ms = wall_ms()
    last_run = load_installation(db_path, now_ms - 5 * DAY_MS)  # its start, as recorded
    assert last_run.adopt_since_ms is not None
    orphan, early, older = (IDS.mint() for _ in range(3))
    place_at(fake_exchange, now_ms - 3 * DAY_MS, orphan)
    place_at(fake_exchange, last_run.adopt_since_ms - 30_000, early)
    place_at(fake_exchange, last_run.adopt_since_ms - 120_000, older)
    collected = CollectedRows()
    async with transport(fake_exchange, fake_credentials) as client:
        adopter = adopter_for(client, db_path, since_ms=last_run.adopt_since_ms)
        summary = await adopter.adopt(collected)
    assert summary is not None and summary.listed == 2
    assert {row.client_order_id for row in collected.rows} == {orphan, early}
    assert {row.status for row in collected.rows} == {OrderStatus.FILLED}


async def test_the_window_reaches_back_no_further_than_the_live_listing(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """A last run that began 40 days ago: the pass lists from ADOPTION_LOOKBACK_MAX_MS back
    (the live listing's window), adopts its order from 29 days ago, not its order from 35,
    and warns once that the window was cut."""
    db_path = fresh_db(short_dir / "t.db")
    now_ms = wall_ms()
    recent, ancient = IDS.mint(), IDS.mint()
    place_at(fake_exchange, now_ms - 29 * DAY_MS, recent)
    place_at(fake_exchange, now_ms - 35 * DAY_MS, ancient)
    collected = CollectedRows()
    async with transport(fake_exchange, fake_credentials) as client:
        adopter = adopter_for(client, db_path, since_ms=now_ms - 40 * DAY_MS)
        with capture_logs() as logs:
            await adopter.adopt(collected)
            await adopter.adopt(CollectedRows())
    assert ADOPTION_LOOKBACK_MAX_MS == 30 * DAY_MS
    assert [row.client_order_id for row in collected.rows] == [recent]
    cut = [entry for entry in logs if entry["event"].startswith("adoption window cut")]
    assert len(cut) == 1 and cut[0]["from_ms"] >= now_ms - ADOPTION_LOOKBACK_MAX_MS


class AdoptionGate:
    """The risk gate's two calls an adoption makes, kept."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self.fills: list[float] = []

    def record_attempt(self, ticker: str, direction: str, count: int, price: float,
                       now_ms: int, correlation_group: str) -> None:  # fmt: skip
        self.attempts.append(ticker)

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None:
        self.fills.append(fill_count)


async def test_an_order_adopted_while_running_reaches_the_gate_once_and_is_followed() -> None:
    """Adopted resting with 1 of 3 filled: the gate hears of the attempt and the contract, and
    the order is followed; adopted again (a second pass), nothing more is counted."""
    gate = AdoptionGate()
    keeper = LedgerKeeper(CollectedRows(), fills=gate)
    row = order_row(
        client_order_id="d" * 32,
        kalshi_order_id="k-d",
        time_in_force="good_till_canceled",
        status=OrderStatus.FILLED,
        fill_count="1.00",
        remaining_count="2.00",
        error_message=ADOPTED_MESSAGE,
    )
    take_adopted(keeper, gate, row)
    assert (gate.attempts, gate.fills) == ([row.ticker], [1.0])
    assert "d" * 32 in keeper.followed
    take_adopted(keeper, gate, row)
    assert gate.fills == [1.0]


def test_an_id_holding_the_prefix_anywhere_but_at_its_start_is_foreign() -> None:
    """This installation's prefix in the middle or at the end of another client's hex id does
    not make it ours; at its start, it does (the negative twin)."""
    ids = ClientOrderIds("ab12cd34")
    ours = "ab12cd34" + "0" * 24
    assert ids.is_ours(ours)
    assert not ids.is_ours("0" * 12 + "ab12cd34" + "0" * 12)
    assert not ids.is_ours("0" * 24 + "ab12cd34")


async def test_a_pass_before_the_settle_time_leaves_the_window_where_it_was(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """Two passes just after start-up (before the settle time) both list from the saved window's
    start: an order the last run left, placed before this run began, is still looked for."""
    db_path = fresh_db(short_dir / "t.db")
    since_ms = wall_ms() - 10 * 60_000
    async with transport(fake_exchange, fake_credentials) as client:
        adopter = adopter_for(client, db_path, since_ms=since_ms)
        await adopter.adopt(CollectedRows())
        await adopter.adopt(CollectedRows())
    listings = [r.query for r in fake_exchange.received if r.path.endswith("/portfolio/orders")]
    assert len(listings) == 2 and listings[0] == listings[1]
    assert f"min_ts={since_ms // 1000 - 60}" in listings[1]
    assert not adopter.settled


class CountingLister:
    """A reader whose listing is always empty, counting the listings asked."""

    def __init__(self) -> None:
        self.listings = 0
        self.asked = trio.Event()

    async def get_json(self, path: str, params: object = None) -> dict[str, object]:
        self.listings += 1
        self.asked.set()
        return {"orders": [], "cursor": ""}


async def test_the_end_of_an_audit_outage_starts_an_adoption_pass(short_dir: Path) -> None:
    """A settled adopter runs no pass on its own; the trail going down asks for none, its
    return asks for one at once."""
    lister = CountingLister()
    adopter = adopter_for(lister, fresh_db(short_dir / "t.db"))
    adopter.settled = True  # past its settle time: passes only when asked
    async with trio.open_nursery() as nursery:
        await nursery.start(adopter.serve, CollectedRows(), lambda row: None)
        adopter.hear_audit(AuditTransition(available=False, error="disk I/O error", outages=1))
        await trio.testing.wait_all_tasks_blocked()
        assert lister.listings == 0
        adopter.hear_audit(AuditTransition(available=True, error=None, outages=1))
        with trio.fail_after(10):
            await lister.asked.wait()
        nursery.cancel_scope.cancel()
    assert lister.listings == 1


async def adopt_while_running(
    adopter: Adopter, keeper: LedgerKeeper, gate: AdoptionGate
) -> list[OrderRow]:
    """One pass as ``Adopter.serve`` runs it: each row it adopts handed to ``take_adopted``."""
    collected = CollectedRows()
    summary = await adopter.adopt(collected)
    assert summary is not None
    for row in summary.rows:
        take_adopted(keeper, gate, row)
    return collected.rows


async def test_an_order_in_flight_is_never_adopted(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, short_dir: Path
) -> None:
    """This run's order is on the exchange (filled) while its journal record is outstanding and
    its row not committed: a pass adopts nothing, so there is no second row and the gate keeps
    the fire's one attempt and hears of no fill. The negative twin: its record settled but the
    row lost, the next pass adopts it (a second attempt and the fill)."""
    db_path = fresh_db(short_dir / "t.db")
    flying = IDS.mint()
    pending = order_row(client_order_id=flying, ticker=TICKER)
    gate = AdoptionGate()
    gate.record_attempt(TICKER, "yes", 3, 0.42, wall_ms(), "")  # as the fire counts it
    keeper = LedgerKeeper(CollectedRows(), fills=gate)
    keeper.track(pending)
    journal = IntentJournal.open(short_dir / "t.journal")
    try:
        journal.append(pending)
        put_on_book(fake_exchange, flying)
        async with transport(fake_exchange, fake_credentials) as client:
            adopter = adopter_for(client, db_path, journal.outstanding)
            assert await adopt_while_running(adopter, keeper, gate) == []
            assert (gate.attempts, gate.fills) == ([TICKER], [])
            assert keeper.row(flying) == pending
            journal.settle([pending])  # the twin: settled, yet its row was never committed
            lost = await adopt_while_running(adopter, keeper, gate)
    finally:
        journal.close()
    assert [row.client_order_id for row in lost] == [flying]
    assert (gate.attempts, gate.fills) == ([TICKER, TICKER], [3.0])
