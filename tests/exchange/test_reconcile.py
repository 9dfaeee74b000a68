"""Reconciliation (``executor.exchange.follow.reconcile``) against the fake exchange over real TLS.

Orders are placed through the real transport with the fake's placed-but-unanswered faults, then
looked up by the :class:`Reconciler`; rows go to a list, fills to another. Waits between tries are
shortened (they are a tunable, not the behaviour under test).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

import executor.exchange.orders.transport as transport_module
from executor.clock import wall_ms
from executor.exchange.follow.lookup import ABSENCE_MARGIN_MS, parse_exchange_order
from executor.exchange.follow.reconcile import (
    MIN_TS_MARGIN_S,
    RECONCILE_TRIES,
    Reconciler,
    Unresolved,
    Verdict,
)
from executor.exchange.messages import ExchangeError
from executor.exchange.orders.transport import (
    ORDERS_PATH,
    ExchangeTimeout,
    OrderStamps,
    order_body,
)
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault, never_fill
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
    rests,
    startup_cause,
)
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from tests.support.orders import TICKER, spec, transport
from tests.support.rows import order_row

NO_WAIT = (0.0, 0.0, 0.0)


@dataclass
class Rows:
    """An ``OrderRowSink`` that keeps the rows, and a ``FillRecorder`` that keeps the fills."""

    rows: list[OrderRow] = field(default_factory=list)
    fills: list[tuple[str, float, str]] = field(default_factory=list)

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        await trio.lowlevel.checkpoint()
        self.rows.append(row)

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None:
        self.fills.append((ticker, fill_count, correlation_group))


def sent_row(client_order_id: str, **changes: Any) -> OrderRow:
    """The ``error`` row a dispatcher leaves for an order sent just now whose outcome it lost."""
    now = wall_ms()
    fields: dict[str, Any] = {
        "kind": OrderRowKind.RESOLUTION,
        "client_order_id": client_order_id,
        "ticker": TICKER,
        "status": OrderStatus.ERROR,
        "error_message": OUTCOME_UNKNOWN_PREFIX + "no response within 0.5 s",
        "requested_at_ms": now,
        "submitted_at_ms": now,
    }
    return order_row(**{**fields, **changes})


@pytest.fixture(autouse=True)
def short_order_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Orders that hang give up after 0.5 s instead of 2 s (the budget is not under test)."""
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.5)


def order_posts(exchange: FakeExchange) -> int:
    """How many order requests the fake received."""
    return sum(1 for request in exchange.received if request.path == transport_module.ORDER_PATH)


def lookups(exchange: FakeExchange) -> list[str]:
    """The query strings of the orders-list requests the fake received."""
    return [request.query for request in exchange.received if request.path == ORDERS_PATH]


async def test_a_timed_out_order_the_exchange_filled_is_reconciled_as_filled(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Timeout after the fake placed it: the row ends ``filled`` with the exchange's id and
    fill columns in the order response's form, counted once, and nothing was sent twice."""
    fake_exchange.inject(Fault("hang", place=True))
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeTimeout):
            await client.place_order(order_body(spec("a" * 32)), OrderStamps(), dry_run=False)
        reconciler = Reconciler(client, sink, delays_s=NO_WAIT)
        with capture_logs() as logs:
            resolution = await reconciler.resolve(sent_row("a" * 32), "no response within 0.5 s")
    placed = fake_exchange.orders["a" * 32]
    assert resolution.verdict is Verdict.FOUND
    (row,) = sink.rows
    assert row == resolution.row
    assert (row.status, row.kalshi_order_id) == (OrderStatus.FILLED, placed["order_id"])
    assert (row.fill_count, row.remaining_count) == ("3.00", "0.00")
    assert (row.average_fill_price, row.average_fee_paid) == (
        placed["average_fill_price"],
        placed["average_fee_paid"],
    )
    assert row.error_message == RECONCILED_PREFIX + "no response within 0.5 s"
    assert row.kind is OrderRowKind.RESOLUTION
    assert resolution.order is not None and resolution.order.filled == 3.0
    assert (reconciler.reconciled, reconciler.reconcile_failed) == (1, 0)
    assert order_posts(fake_exchange) == 1
    assert [entry["event"] for entry in logs] == ["order reconciled with the exchange"]


async def test_a_dropped_connection_after_a_kill_is_reconciled_as_canceled(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A kill the client never heard of (connection dropped after placing, no retry budget)
    ends ``canceled`` with nothing filled and no averages."""
    fake_exchange.fill_rule = never_fill
    fake_exchange.inject(Fault("drop", place=True))
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        client.retry = dataclasses.replace(client.retry, max_attempts=1)
        stamps = OrderStamps()
        with pytest.raises(ExchangeError) as caught:
            await client.place_order(order_body(spec("b" * 32)), stamps, dry_run=False)
        assert caught.value.maybe_placed and stamps.maybe_placed
        resolution = await Reconciler(client, sink, delays_s=NO_WAIT).resolve(
            sent_row("b" * 32), str(caught.value)
        )
    (row,) = sink.rows
    assert resolution.verdict is Verdict.FOUND
    assert (row.status, row.fill_count, row.remaining_count) == (
        OrderStatus.CANCELED,
        "0.00",
        "0.00",
    )
    assert (row.average_fill_price, row.average_fee_paid) == (None, None)
    assert order_posts(fake_exchange) == 1


async def test_an_order_the_exchange_never_had_is_unknown_until_its_data_covers_the_send(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Not placed (hang without place), asked right after the send: every try misses it but the
    exchange's data is not yet past the send plus the margin, so the row stays open and
    followed (unknown, nothing written); once the exchange's clock is past that, the next poll
    writes ``error`` "no such order", counted as a failure; nothing is ever re-sent."""
    fake_exchange.inject(Fault("hang"))
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeTimeout):
            await client.place_order(order_body(spec("c" * 32)), OrderStamps(), dry_run=False)
        reconciler = Reconciler(client, sink, delays_s=NO_WAIT)
        with capture_logs() as logs:
            resolution = await reconciler.resolve(sent_row("c" * 32), "no response within 0.5 s")
        assert resolution.verdict is Verdict.UNKNOWN and resolution.error is None
        assert sink.rows == [] and len(lookups(fake_exchange)) == RECONCILE_TRIES
        assert (reconciler.lookups_unknown, reconciler.orders_open) == (1, 1)
        assert [entry["event"] for entry in logs] == ["order not listed yet: outcome still unknown"]
        fake_exchange.clock = lambda: wall_ms() + ABSENCE_MARGIN_MS + 1_000
        with capture_logs() as logs:
            await reconciler.poll_resting()
    (row,) = sink.rows
    assert row.status is OrderStatus.ERROR and row.kalshi_order_id is None
    assert row.error_message == NO_SUCH_ORDER_PREFIX + "no response within 0.5 s"
    assert (reconciler.reconciled, reconciler.reconcile_failed) == (0, 1)
    assert reconciler.orders_open == 0
    assert order_posts(fake_exchange) == 1
    assert [entry["event"] for entry in logs] == [
        "reconcile failed: the exchange has no such order"
    ]


async def test_the_lookup_asks_by_ticker_from_a_little_before_the_send(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The query filters on the row's ticker and a ``min_ts`` one margin before its send."""
    sink = Rows()
    row = sent_row("d" * 32)
    async with transport(fake_exchange, fake_credentials) as client:
        await Reconciler(client, sink, delays_s=NO_WAIT).reconcile([Unresolved(row, "x")], tries=1)
    assert row.submitted_at_ms is not None
    (query,) = lookups(fake_exchange)
    assert f"ticker={TICKER}" in query
    assert f"min_ts={row.submitted_at_ms // 1000 - MIN_TS_MARGIN_S}" in query


async def test_the_lookup_follows_the_cursor_to_find_an_older_order(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The order sought is on the third page (two orders a page, newest first): it is found."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        for n in range(6):
            await client.place_order(order_body(spec(f"{n:032x}")), OrderStamps(), dry_run=False)
        resolution = await Reconciler(client, sink, delays_s=NO_WAIT).resolve(
            sent_row(f"{0:032x}"), "x"
        )
    assert resolution.verdict is Verdict.FOUND
    assert len(lookups(fake_exchange)) == 3
    assert "cursor=" in lookups(fake_exchange)[-1]


class FailingReader:
    """A reader whose every request fails, as an unreachable exchange's would."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        raise ExchangeError("connection error: ConnectError: refused")


async def test_an_exchange_that_cannot_be_asked_leaves_the_row_for_later() -> None:
    """Every request failing: no row is written (it keeps its outcome-unknown marker for the
    poll and the next start-up), the lookup ends unknown and is counted so, logged at ERROR
    with the reason; each try asked the timestamp and the listing."""
    reader, sink = FailingReader(), Rows()
    reconciler = Reconciler(reader, sink, delays_s=NO_WAIT)
    row = sent_row("e" * 32)
    with capture_logs() as logs:
        resolution = await reconciler.resolve(row, "no response within 0.5 s")
    assert resolution.verdict is Verdict.UNKNOWN and resolution.row == row
    assert resolution.error is not None and "refused" in resolution.error
    assert sink.rows == []
    assert reader.calls == 2 * RECONCILE_TRIES
    assert (reconciler.reconcile_failed, reconciler.lookups_unknown) == (0, 1)
    assert reconciler.orders_open == 1
    assert [(entry["event"], entry["log_level"]) for entry in logs] == [
        ("order lookup unanswered: outcome still unknown", "error")
    ]


async def test_a_resting_order_that_later_fills_becomes_filled_and_the_gate_hears(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A good_till_canceled order followed by the poll: a partial fill updates the row and
    tells the risk gate 1 contract, the rest 2 more; then it is no longer followed."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        response = await client.place_order(
            order_body(spec("f" * 32, time_in_force="good_till_canceled")),
            OrderStamps(),
            dry_run=False,
        )
        accepted = order_row(
            kind=OrderRowKind.RESOLUTION,
            client_order_id="f" * 32,
            ticker=TICKER,
            time_in_force="good_till_canceled",
            status=OrderStatus.ACCEPTED,
            kalshi_order_id=response["order_id"],
            fill_count=response["fill_count"],
            remaining_count=response["remaining_count"],
            requested_at_ms=wall_ms(),
            submitted_at_ms=wall_ms(),
        )
        reconciler = Reconciler(client, sink, fills=sink, delays_s=NO_WAIT)
        reconciler.follow(accepted)
        await reconciler.poll_resting()
        assert sink.rows == [] and reconciler.resting == 1  # nothing changed yet
        fake_exchange.fill_resting("f" * 32, "1")
        await reconciler.poll_resting()
        fake_exchange.fill_resting("f" * 32)
        await reconciler.poll_resting()
        await reconciler.poll_resting()
    partly, done = sink.rows
    assert (partly.status, partly.fill_count, partly.remaining_count) == (
        OrderStatus.FILLED,
        "1.00",
        "2.00",
    )
    assert (done.status, done.fill_count, done.remaining_count) == (
        OrderStatus.FILLED,
        "3.00",
        "0.00",
    )
    assert done.average_fill_price == "0.4200" and done.error_message is None
    assert sink.fills == [(TICKER, 1.0, "group-a"), (TICKER, 2.0, "group-a")]
    assert reconciler.resting == 0
    assert (reconciler.reconciled, reconciler.reconcile_failed) == (0, 0)


async def test_a_resting_order_cancelled_on_the_exchange_becomes_canceled(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A resting order cancelled on the exchange: its row becomes ``canceled``, no fill told."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        await client.place_order(
            order_body(spec("9" * 32, time_in_force="good_till_canceled")),
            OrderStamps(),
            dry_run=False,
        )
        reconciler = Reconciler(client, sink, fills=sink, delays_s=NO_WAIT)
        reconciler.follow(
            sent_row(
                "9" * 32,
                status=OrderStatus.ACCEPTED,
                error_message=None,
                time_in_force="good_till_canceled",
                fill_count="0.00",
                remaining_count="3.00",
            )
        )
        fake_exchange.cancel_resting("9" * 32)
        await reconciler.poll_resting()
    (row,) = sink.rows
    assert row.status is OrderStatus.CANCELED and sink.fills == []
    assert reconciler.resting == 0


def test_only_resting_good_till_canceled_rows_are_followed() -> None:
    """A fill_or_kill row, or a good_till_canceled one with nothing remaining, rests no more."""
    gtc = {"time_in_force": "good_till_canceled", "status": OrderStatus.ACCEPTED}
    assert rests(order_row(remaining_count="3.00", **gtc))
    assert rests(order_row(remaining_count="2.00", **{**gtc, "status": OrderStatus.FILLED}))
    assert not rests(order_row(remaining_count="0.00", **gtc))
    assert not rests(order_row(remaining_count="3.00", status=OrderStatus.ACCEPTED))
    assert not rests(order_row(remaining_count="3.00", **{**gtc, "status": OrderStatus.ERROR}))


def test_an_earlier_runs_row_says_why_it_is_unresolved() -> None:
    """Pending and submitted rows name their state; an error row keeps its cause without the
    marker; a resting row has none (it is followed, its message kept)."""
    assert startup_cause(order_row()) == "left pending by an earlier run"
    assert startup_cause(order_row(status=OrderStatus.SUBMITTED)) == (
        "left submitted by an earlier run"
    )
    marked = order_row(status=OrderStatus.ERROR, error_message=OUTCOME_UNKNOWN_PREFIX + "boom")
    assert startup_cause(marked) == "boom"
    shutdown = order_row(status=OrderStatus.ERROR, error_message="cancelled at shutdown")
    assert startup_cause(shutdown) == "cancelled at shutdown"
    assert startup_cause(order_row(status=OrderStatus.ACCEPTED)) is None


async def test_start_up_resolves_an_earlier_runs_rows_in_one_summary(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Four rows left by an earlier run (one filled, one killed, one resting, one never placed
    and sent a minute ago, so the exchange's data covers it) are corrected in one pass and
    summed up in one line; the resting one is followed."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        await client.place_order(order_body(spec("1" * 32)), OrderStamps(), dry_run=False)
        fake_exchange.fill_rule = never_fill
        await client.place_order(order_body(spec("2" * 32)), OrderStamps(), dry_run=False)
        await client.place_order(
            order_body(spec("3" * 32, time_in_force="good_till_canceled")),
            OrderStamps(),
            dry_run=False,
        )
        rows = [
            sent_row("1" * 32, status=OrderStatus.PENDING, error_message=None),
            sent_row("2" * 32),
            sent_row(
                "3" * 32,
                status=OrderStatus.SUBMITTED,
                error_message=None,
                time_in_force="good_till_canceled",
            ),
            sent_row(
                "4" * 32,
                status=OrderStatus.PENDING,
                error_message=None,
                requested_at_ms=wall_ms() - 60_000,
                submitted_at_ms=wall_ms() - 60_000,
            ),
        ]
        reconciler = Reconciler(client, sink, fills=sink, delays_s=NO_WAIT)
        with capture_logs() as logs:
            summary = await reconciler.reconcile_at_startup(rows)
    assert (summary.filled, summary.canceled, summary.resting, summary.absent) == (1, 1, 1, 1)
    by_id = {row.client_order_id: row for row in sink.rows}
    assert by_id["1" * 32].status is OrderStatus.FILLED
    assert by_id["1" * 32].error_message == RECONCILED_PREFIX + "left pending by an earlier run"
    assert by_id["2" * 32].status is OrderStatus.CANCELED
    assert by_id["3" * 32].status is OrderStatus.ACCEPTED
    assert by_id["4" * 32].status is OrderStatus.ERROR
    assert by_id["4" * 32].error_message == (
        NO_SUCH_ORDER_PREFIX + "left pending by an earlier run"
    )
    assert reconciler.resting == 1
    assert sink.fills == []  # the warm start reads them from the corrected rows
    assert (reconciler.reconciled, reconciler.reconcile_failed) == (3, 1)
    (line,) = [entry for entry in logs if entry["event"] == "start-up reconciliation"]
    assert (line["filled"], line["canceled"], line["resting"], line["absent"]) == (1, 1, 1, 1)


def test_an_ask_fill_is_averaged_on_the_yes_side() -> None:
    """A NO fill costs 1 - p a contract; the row's average is the YES price, as the order
    response quotes it; a malformed count is an exchange error, not a crash."""
    entry = {
        "order_id": "o",
        "client_order_id": "c",
        "status": "executed",
        "book_side": "ask",
        "fill_count_fp": "2.00",
        "remaining_count_fp": "0.00",
        "taker_fill_cost_dollars": "1.1600",
        "maker_fill_cost_dollars": "0.0000",
        "taker_fees_dollars": "0.0400",
        "maker_fees_dollars": "0.0000",
    }
    order = parse_exchange_order(entry)
    assert (order.average_fill_price, order.average_fee_paid) == ("0.4200", "0.0200")
    with pytest.raises(ExchangeError, match="fill_count_fp"):
        parse_exchange_order({**entry, "fill_count_fp": "many"})


async def test_resting_orders_stay_followed_when_the_exchange_cannot_be_asked() -> None:
    """A failed look at two resting orders is one warning; both are still followed, no row
    is written and nothing is counted as a reconciliation."""
    reader, sink = FailingReader(), Rows()
    reconciler = Reconciler(reader, sink, fills=sink, delays_s=NO_WAIT)
    for client_order_id in ("7" * 32, "8" * 32):
        reconciler.follow(
            order_row(
                kind=OrderRowKind.RESOLUTION,
                client_order_id=client_order_id,
                status=OrderStatus.ACCEPTED,
                time_in_force="good_till_canceled",
                remaining_count="3.00",
            )
        )
    with capture_logs() as logs:
        await reconciler.poll_resting()
    assert [(entry["event"], entry["orders"]) for entry in logs] == [
        ("resting orders lookup failed: still followed", 2)
    ]
    assert reconciler.resting == 2 and sink.rows == [] and sink.fills == []
    assert (reconciler.reconciled, reconciler.reconcile_failed) == (0, 0)


async def test_a_submitted_order_is_followed_until_the_exchange_says_how_it_ended(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """An answer without a fill count leaves ``submitted``; the next poll learns it filled,
    writes it, tells the risk gate, and stops following it."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        await client.place_order(order_body(spec("6" * 32)), OrderStamps(), dry_run=False)
        reconciler = Reconciler(client, sink, fills=sink, delays_s=NO_WAIT)
        reconciler.follow(sent_row("6" * 32, status=OrderStatus.SUBMITTED, error_message=None))
        assert reconciler.resting == 1
        await reconciler.poll_resting()
    (row,) = sink.rows
    assert (row.status, row.fill_count, row.error_message) == (OrderStatus.FILLED, "3.00", None)
    assert sink.fills == [(TICKER, 3.0, "group-a")]
    assert reconciler.resting == 0
    reconciler.follow(sent_row("x" * 32, status=OrderStatus.CANCELED, error_message=None))
    assert reconciler.resting == 0  # a final status is not followed
