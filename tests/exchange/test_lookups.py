"""Lookups with three answers (found, absent, unknown), and the guards of issue 21 on them.

Absent only when the exchange's data covers the send; otherwise the row stays open and is asked
again. Most tests drive the :class:`Reconciler` against a scripted reader (answers written by the
test, no sockets); the ones about listing late, paging and orders that leave the listing use the
fake exchange over real TLS. Each guard here was seen failing with its defect put in on purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from executor.clock import wall_ms
from executor.exchange.follow.lookup import ABSENCE_MARGIN_MS, absence_known, parse_as_of_ms
from executor.exchange.follow.reconcile import (
    LOOKUP_TIMEOUT_S,
    RECONCILE_TRIES,
    Reconciler,
    Unresolved,
    Verdict,
)
from executor.exchange.messages import USER_DATA_TIMESTAMP_PATH, ExchangeError
from executor.exchange.orders.transport import ORDERS_PATH, OrderStamps, order_body
from executor.exchange.stream.client import poll_unless_streaming
from executor.exchange.stream.orders import StreamedOrders
from executor.fake.book.orders import iso_time
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.orders.open_orders import LIVE_WINDOW_MS
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
)
from executor.recording.rows import LatencyRow, OrderRow, OrderStatus
from tests.exchange.test_reconcile import Rows, sent_row
from tests.support.orders import TICKER, spec, transport

NO_WAIT = (0.0, 0.0, 0.0)
MINUTE_MS = 60_000
LISTED_FILL: dict[str, Any] = {
    "order_id": "k-1",
    "status": "executed",
    "book_side": "bid",
    "fill_count_fp": "3.00",
    "remaining_count_fp": "0.00",
    "taker_fill_cost_dollars": "1.2600",
    "taker_fees_dollars": "0.0600",
}
"""A listed order that filled 3 contracts (its ``client_order_id`` added by each test)."""


@dataclass
class ScriptedReader:
    """A ``SignedReader`` answering what the test wrote: the data timestamp, and per ticker one
    page of listed orders; ``failures`` are raised by the next listing requests, in order;
    ``failing`` tickers always fail; ``hang`` never answers anything."""

    as_of_ms: int
    listed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    failures: list[Exception] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)
    hang: bool = False
    calls: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        self.calls.append((path, dict(params or {})))
        if self.hang:
            await trio.sleep_forever()
        if path == USER_DATA_TIMESTAMP_PATH:
            return {"as_of_time": iso_time(self.as_of_ms)}
        ticker = (params or {})["ticker"]
        if self.failures:
            raise self.failures.pop(0)
        if ticker in self.failing:
            raise ExchangeError("503 service_unavailable: busy", status=503)
        return {"orders": self.listed.get(ticker, []), "cursor": ""}

    def listings(self, ticker: str) -> int:
        """How many times the listing of ``ticker`` was asked."""
        return sum(1 for path, params in self.calls if params.get("ticker") == ticker)


def unknown_row(client_order_id: str, sent_ms: int, ticker: str = TICKER) -> OrderRow:
    """An ``error`` row of an order of unknown outcome sent at ``sent_ms``."""
    return sent_row(
        client_order_id, ticker=ticker, requested_at_ms=sent_ms, submitted_at_ms=sent_ms
    )


# ---------------------------------------------------------------- the rule


def test_absence_needs_the_exchanges_data_past_the_send_and_the_margin() -> None:
    """Absent only when as_of is later than the send plus the margin and the send is inside
    the live window; at the margin exactly, or older than the window, it is not known."""
    now = 10 * LIVE_WINDOW_MS
    sent = now - MINUTE_MS
    assert absence_known(sent, sent + ABSENCE_MARGIN_MS + 1, now)
    assert not absence_known(sent, sent + ABSENCE_MARGIN_MS, now)
    assert not absence_known(sent, sent - 1, now)  # data older than the send
    old = now - LIVE_WINDOW_MS
    assert not absence_known(old, now, now)
    assert absence_known(old + 1, now, now)


def test_the_data_timestamp_is_read_as_rfc_3339() -> None:
    """as_of_time with nanoseconds, a zone offset or none (UTC) reads to the same ms; a number
    or text that is no date is an exchange error, not a crash."""
    assert parse_as_of_ms("2026-01-01T00:00:00.123456789Z") == 1_767_225_600_123
    assert parse_as_of_ms("2026-01-01T01:00:00.123+01:00") == 1_767_225_600_123
    assert parse_as_of_ms("2026-01-01T00:00:00.123") == 1_767_225_600_123
    for bad in (1_767_225_600, "soon", None):
        with pytest.raises(ExchangeError, match="user data timestamp"):
            parse_as_of_ms(bad)


async def test_not_listed_before_the_data_covers_the_send_is_unknown() -> None:
    """An order not listed while the exchange's data is as of before the send plus the margin:
    unknown, no row written, followed; the same order once the data covers it: absent."""
    now = wall_ms()
    reader = ScriptedReader(as_of_ms=now)
    sink = Rows()
    reconciler = Reconciler(reader, sink, delays_s=NO_WAIT)
    young = await reconciler.resolve(unknown_row("1" * 32, now - 1_000), "timed out")
    assert young.verdict is Verdict.UNKNOWN and young.error is None
    assert sink.rows == [] and reconciler.orders_open == 1
    assert reconciler.lookups_unknown == 1
    old = await reconciler.resolve(unknown_row("2" * 32, now - MINUTE_MS), "timed out")
    assert old.verdict is Verdict.ABSENT
    assert [row.error_message for row in sink.rows] == [NO_SUCH_ORDER_PREFIX + "timed out"]


async def test_each_try_reads_the_data_timestamp_before_the_listing() -> None:
    """The timestamp is asked first, so the listing read after it covers at least as much."""
    reader = ScriptedReader(as_of_ms=wall_ms())
    await Reconciler(reader, Rows(), delays_s=NO_WAIT).resolve(
        unknown_row("3" * 32, wall_ms()), "timed out"
    )
    paths = [path for path, _ in reader.calls]
    assert paths == [USER_DATA_TIMESTAMP_PATH, ORDERS_PATH] * RECONCILE_TRIES


# ---------------------------------------------------------------- the guards


async def test_an_order_listed_a_second_late_is_found_because_the_waits_happen(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The exchange lists 1 s late: the fire's lookups, with their real waits between them
    (0.5, 1, 2 s), find the order; without the waits every try would come too early."""
    fake_exchange.listing_lag_s = 1.0
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        await client.place_order(order_body(spec("4" * 32)), OrderStamps(), dry_run=False)
        resolution = await Reconciler(client, sink).resolve(sent_row("4" * 32), "timed out")
    assert resolution.verdict is Verdict.FOUND
    assert [row.status for row in sink.rows] == [OrderStatus.FILLED]


async def test_an_error_on_an_early_try_does_not_stick_when_a_later_one_answers() -> None:
    """The first listing fails, the second answers without the order: absent (the data covers
    the send), not unanswered; and for a young order, unknown without the stale error."""
    now = wall_ms()
    refusal = ExchangeError("connection error: refused")
    reader = ScriptedReader(as_of_ms=now, failures=[refusal])
    sink = Rows()
    reconciler = Reconciler(reader, sink, delays_s=NO_WAIT)
    old = await reconciler.resolve(unknown_row("5" * 32, now - MINUTE_MS), "timed out")
    assert old.verdict is Verdict.ABSENT and old.error is None
    assert [row.status for row in sink.rows] == [OrderStatus.ERROR]
    reader.failures.append(refusal)
    young = await reconciler.resolve(unknown_row("6" * 32, now), "timed out")
    assert young.verdict is Verdict.UNKNOWN and young.error is None


async def test_at_start_up_a_young_row_gets_every_try_and_old_rows_one() -> None:
    """Among old rows (their tickers' listings failing, so each try ends unknown), a row sent
    just now is asked RECONCILE_TRIES times and each old one once, not the other way round."""
    now = wall_ms()
    reader = ScriptedReader(as_of_ms=now, failing={"OLD-A", "OLD-B"})
    rows = [
        unknown_row("7" * 32, now - 10 * MINUTE_MS, ticker="OLD-A"),
        unknown_row("8" * 32, now, ticker="YOUNG"),
        unknown_row("9" * 32, now - 5 * MINUTE_MS, ticker="OLD-B"),
    ]
    summary = await Reconciler(reader, Rows(), delays_s=NO_WAIT).reconcile_at_startup(rows)
    assert (reader.listings("OLD-A"), reader.listings("OLD-B")) == (1, 1)
    assert reader.listings("YOUNG") == RECONCILE_TRIES
    assert summary.unknown == 3


async def test_a_lookup_that_times_out_leaves_the_row_open_and_raises_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An exchange that never answers: each request gives up after LOOKUP_TIMEOUT_S, the fire's
    resolve and start-up both return (unknown, "no answer within ..."), nothing is written and
    the row is followed."""
    reader = ScriptedReader(as_of_ms=wall_ms(), hang=True)
    sink = Rows()
    reconciler = Reconciler(reader, sink, delays_s=NO_WAIT)
    row = unknown_row("a" * 32, wall_ms())
    resolution = await reconciler.resolve(row, "timed out")
    assert resolution.verdict is Verdict.UNKNOWN and resolution.row == row
    assert resolution.error == f"no answer within {LOOKUP_TIMEOUT_S:g} s"
    summary = await reconciler.reconcile_at_startup([unknown_row("b" * 32, wall_ms())])
    assert summary.unknown == 1
    assert sink.rows == [] and reconciler.orders_open == 2


async def test_an_order_the_exchange_no_longer_lists_is_not_followed_forever(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A resting order followed by the poll leaves the listing (the historical cutoff): once the
    exchange's data is past its send, the next poll drops it, and later polls ask nothing."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        await client.place_order(
            order_body(spec("c" * 32, time_in_force="good_till_canceled")),
            OrderStamps(),
            dry_run=False,
        )
        reconciler = Reconciler(client, sink, delays_s=NO_WAIT)
        reconciler.follow(
            sent_row(
                "c" * 32,
                status=OrderStatus.ACCEPTED,
                error_message=None,
                time_in_force="good_till_canceled",
                remaining_count="3.00",
            )
        )
        await reconciler.poll_resting()
        assert reconciler.orders_open == 1
        written = list(sink.rows)  # the poll took the exchange's order id
        fake_exchange.archive("c" * 32)
        fake_exchange.clock = lambda: wall_ms() + ABSENCE_MARGIN_MS + 1_000
        await reconciler.poll_resting()
        asked = len(fake_exchange.received)
        for _ in range(3):
            await reconciler.poll_resting()
    assert reconciler.orders_open == 0
    assert len(fake_exchange.received) == asked
    assert sink.rows == written  # its row is left as it was


async def test_paging_goes_on_until_every_id_sought_is_found(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Two orders sought, the newest on page 1 and the oldest on page 3 (two a page): finding
    the first does not end the search; both are found in one pass of three pages."""
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        for n in range(6):
            await client.place_order(order_body(spec(f"{n:032x}")), OrderStamps(), dry_run=False)
        resolutions = await Reconciler(client, sink, delays_s=NO_WAIT).reconcile(
            [Unresolved(sent_row(f"{5:032x}"), "x"), Unresolved(sent_row(f"{0:032x}"), "x")],
            tries=1,
        )
    assert [resolution.verdict for resolution in resolutions] == [Verdict.FOUND] * 2
    assert len([r for r in fake_exchange.received if r.path == ORDERS_PATH]) == 3


# ---------------------------------------------------------------- issue 21 item 3


async def test_an_exchange_listing_late_never_makes_start_up_conclude_absent(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Issue 21 item 3: the exchange lists 7.5 s late and an earlier run's pending row was sent
    just now: start-up's tries miss it but write no "no such order" (unknown, followed); when
    the listing catches up the next poll finds it filled."""
    fake_exchange.listing_lag_s = 7.5
    sink = Rows()
    async with transport(fake_exchange, fake_credentials) as client:
        await client.place_order(order_body(spec("d" * 32)), OrderStamps(), dry_run=False)
        reconciler = Reconciler(client, sink, delays_s=NO_WAIT)
        pending = sent_row("d" * 32, status=OrderStatus.PENDING, error_message=None)
        summary = await reconciler.reconcile_at_startup([pending])
        assert (summary.absent, summary.unknown) == (0, 1)
        assert sink.rows == [] and reconciler.orders_open == 1
        fake_exchange.listing_lag_s = 0.0
        await reconciler.poll_resting()
    (row,) = sink.rows
    assert (row.status, row.fill_count) == (OrderStatus.FILLED, "3.00")
    assert row.error_message == RECONCILED_PREFIX + "left pending by an earlier run"
    assert reconciler.orders_open == 0


async def test_a_row_found_absent_before_is_asked_again_and_can_be_found() -> None:
    """A row an earlier start-up marked "no such order" is asked again: found now, it is
    corrected with its original cause; absent again, it is not rewritten or recounted."""
    now = wall_ms()
    earlier = sent_row(
        "e" * 32,
        error_message=NO_SUCH_ORDER_PREFIX + "timed out",
        requested_at_ms=now - MINUTE_MS,
        submitted_at_ms=now - MINUTE_MS,
    )
    listed = {**LISTED_FILL, "client_order_id": "e" * 32}
    sink = Rows()
    reconciler = Reconciler(ScriptedReader(as_of_ms=now), sink, delays_s=NO_WAIT)
    again = await reconciler.reconcile_at_startup([earlier])
    assert again.absent == 1 and sink.rows == [] and reconciler.reconcile_failed == 0
    reconciler = Reconciler(
        ScriptedReader(as_of_ms=now, listed={TICKER: [listed]}), sink, delays_s=NO_WAIT
    )
    await reconciler.reconcile_at_startup([earlier])
    (row,) = sink.rows
    assert (row.status, row.kalshi_order_id) == (OrderStatus.FILLED, "k-1")
    assert row.error_message == RECONCILED_PREFIX + "timed out"


async def test_an_unknown_outcome_row_is_followed_with_its_cause() -> None:
    """Following an ``error`` row of unknown outcome keeps its cause (read from its marker): the
    poll that finds it writes "reconciled ... after: <cause>", never a filled row still saying
    "outcome unknown", and tells the risk gate of the fill once (the fire that sent it had
    ended without knowing)."""
    now = wall_ms()
    listed = {**LISTED_FILL, "client_order_id": "f" * 32}
    sink = Rows()
    reader = ScriptedReader(as_of_ms=now, listed={TICKER: [listed]})
    reconciler = Reconciler(reader, sink, fills=sink)
    row = unknown_row("f" * 32, now)
    assert row.error_message == OUTCOME_UNKNOWN_PREFIX + "no response within 0.5 s"
    reconciler.follow(row)
    await reconciler.poll_resting()
    await reconciler.poll_resting()  # no longer followed: nothing more
    (written,) = sink.rows
    assert written.status is OrderStatus.FILLED
    assert written.error_message == RECONCILED_PREFIX + "no response within 0.5 s"
    assert reconciler.reconciled == 1
    assert sink.fills == [(TICKER, 3.0, "group-a")]


async def test_the_fires_own_lookup_tells_the_gate_once_through_the_ledger() -> None:
    """The fire's resolve finds the order filled and the ledger tells the risk gate of its 3
    contracts once; asked again, nothing more (told twice, the gate would count 6)."""
    now = wall_ms()
    listed = {**LISTED_FILL, "client_order_id": "9" * 32}
    sink = Rows()
    reader = ScriptedReader(as_of_ms=now, listed={TICKER: [listed]})
    reconciler = Reconciler(reader, sink, fills=sink)
    resolution = await reconciler.resolve(unknown_row("9" * 32, now), "timed out")
    assert resolution.order is not None and resolution.order.filled == 3.0
    assert [fill[1] for fill in sink.fills] == [3.0]
    await reconciler.resolve(unknown_row("9" * 32, now), "timed out")
    assert [fill[1] for fill in sink.fills] == [3.0]


async def test_while_the_stream_is_trusted_the_poll_still_asks_about_unknown_outcomes() -> None:
    """With the stream trusted the poll leaves orders on the book to it but still looks up an
    order of unknown outcome (an order the exchange never had sends no stream message), until
    the exchange's data says it is absent."""
    now = wall_ms()
    reader = ScriptedReader(as_of_ms=now + ABSENCE_MARGIN_MS + 1)
    sink = Rows()
    reconciler = Reconciler(reader, sink)
    stream = StreamedOrders(reconciler, StreamSinkStub())
    stream.trusted = True
    reconciler.follow(unknown_row("1" * 32, now))
    reconciler.follow(
        sent_row(
            "2" * 32,
            ticker="RESTING",
            status=OrderStatus.ACCEPTED,
            error_message=None,
            time_in_force="good_till_canceled",
            remaining_count="3.00",
        )
    )
    await poll_unless_streaming(stream, reconciler)()
    assert reader.listings(TICKER) == 1 and reader.listings("RESTING") == 0
    assert [row.error_message for row in sink.rows] == [
        NO_SUCH_ORDER_PREFIX + "no response within 0.5 s"
    ]
    assert reconciler.orders_open == 1  # the resting one, the stream's to follow


class StreamSinkStub:
    """Where the stream would write its rows (nothing is streamed in these tests)."""

    def record(self, row: LatencyRow) -> None:
        raise AssertionError("no stream rows expected")

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        raise AssertionError("no stream rows expected")
