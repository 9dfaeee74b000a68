"""The races of issue 35, each forced through the real code at one await point, and the ledger's
own rules on single cases (``executor.exchange.follow.ledger``).

Finding 1: a poll lookup read before the stream's newer word concludes after it. Finding 3: a fill
found by a cancel reaches the risk gate. Finding 5: exit cancels write each batch's rows as it
answers. Finding 6: the journal's compaction is durable and its replay never takes a row back
(tests/recording has those two). Findings 2 and 4 drive the real stream connection
(tests/exchange/test_stream_connection.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from executor.clock import wall_ms
from executor.exchange.book.cancels import cancel_resting
from executor.exchange.book.guard import BookGuard
from executor.exchange.follow.ledger import OrderLedger
from executor.exchange.follow.ledger_keeper import LedgerKeeper
from executor.exchange.follow.observation import Observation, Source, observed_row
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.messages import USER_DATA_TIMESTAMP_PATH
from executor.exchange.orders.transport import ExchangeClient
from executor.exchange.rate_limits import RateLimits
from executor.exchange.stream.orders import StreamedOrders
from executor.fake.book.orders import iso_time
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.database import open_database
from executor.recording.orders.intent_journal import IntentJournal, journal_path
from executor.recording.orders.journal_replay import replay_journal
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from executor.recording.sqlite_writer import write_batch
from tests.exchange.test_cancels import rest
from tests.exchange.test_stream_orders import (
    CLIENT_ORDER_ID,
    Sinks,
    book_order,
    maker_fill,
    order_update,
    resting_row,
)
from tests.support.orders import transport
from tests.support.rows import order_row


@dataclass
class HeldListing:
    """A reader whose listing is read at once but answered only when :attr:`release` is set:
    the lookup's await point, held while the stream speaks."""

    listed: dict[str, Any]
    asked: trio.Event = field(default_factory=trio.Event)
    release: trio.Event = field(default_factory=trio.Event)

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        if path == USER_DATA_TIMESTAMP_PATH:
            return {"as_of_time": iso_time(wall_ms())}
        self.asked.set()
        await self.release.wait()
        return {"orders": [self.listed], "cursor": ""}


# ---------------------------------------------------------------- finding 1


async def test_a_poll_lookup_that_concludes_after_the_stream_never_takes_the_row_back() -> None:
    """The poll reads "1 filled, resting"; before it concludes the stream applies "3 filled,
    executed". The row stays filled 3.00 and final, the gate hears of 3 contracts (not 4), and
    the finished order is no longer followed."""
    sink = Sinks()
    reader = HeldListing(book_order("1").as_published())
    reconciler = Reconciler(reader, sink, fills=sink)
    reconciler.follow(resting_row())
    orders = StreamedOrders(reconciler, sink)
    orders.trusted = True
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reconciler.poll_resting)
        await reader.asked.wait()
        await orders.apply(order_update("3", "executed"))
        reader.release.set()
    last = sink.rows[-1]
    assert (last.status, last.fill_count, last.remaining_count) == (
        OrderStatus.FILLED,
        "3.00",
        "0.00",
    )
    assert sum(sink.fills) == 3.0
    assert CLIENT_ORDER_ID not in reconciler.followed


# ---------------------------------------------------------------- finding 3


async def test_a_fill_found_by_a_cancel_reaches_the_risk_gate_once(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """One of three contracts filled unseen, then the exit cancel ends the order: the gate hears
    of that contract through the ledger, and the stream's late fill message of it adds nothing."""
    sink = Sinks()
    async with transport(fake_exchange, fake_credentials) as client:
        row = await rest(client, "q")
        reconciler = Reconciler(client.rest, sink, fills=sink)
        reconciler.follow(row)
        fake_exchange.fill_resting(row.client_order_id, "1")
        guard = BookGuard(
            client.rest,
            reconciler,
            reconciler.keeper.source(Source.CANCEL),
            group=None,
            kill_switch=None,
            audit=None,
            cancel_on_engage=True,
            trigger_on_engage=False,
        )
        await guard.cancel_at_exit()
    (written,) = sink.rows
    assert (written.status, written.fill_count) == (OrderStatus.FILLED, "1.00")
    assert sink.fills == [1.0]
    assert row.client_order_id not in reconciler.followed
    late = StreamedOrders(reconciler, sink)
    late.trusted = True
    await late.apply(maker_fill("1", wall_ms() + 1000))
    assert sink.fills == [1.0] and len(sink.rows) == 1


# ---------------------------------------------------------------- finding 5


@dataclass
class OneBatchAtATime:
    """The fake's REST client, naming one order per batch cancel; the second batch never
    answers (the exit's budget runs out on it)."""

    client: ExchangeClient
    second_batch: trio.Event = field(default_factory=trio.Event)
    batches: int = 0

    @property
    def limits(self) -> RateLimits:
        return _OnePerBatch(self.client.rest.limits)  # type: ignore[return-value]

    async def send_json(self, method: str, path: str, body: bytes | None = None, **kw: Any) -> Any:
        self.batches += 1
        if self.batches > 1:
            self.second_batch.set()
            await trio.sleep_forever()
        return await self.client.rest.send_json(method, path, body, **kw)

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        return await self.client.rest.get_json(path, params)


@dataclass
class _OnePerBatch:
    limits: RateLimits

    def items_per_batch(self, method: str, path: str, most: int) -> int:
        return 1


async def test_exit_cancels_write_each_batchs_rows_as_it_answers(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Two batches; the second is cut by the budget: the first batch's order, cancelled on the
    exchange, already has its canceled row (not an open row until the next start)."""
    sink = Sinks()
    async with transport(fake_exchange, fake_credentials) as client:
        rows = [await rest(client, name) for name in "xy"]
        writer = OneBatchAtATime(client)
        async with trio.open_nursery() as nursery:

            async def cancel() -> None:
                await cancel_resting(writer, rows, sink, reason="executor shutdown")

            nursery.start_soon(cancel)
            await writer.second_batch.wait()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert [(row.client_order_id, row.status) for row in sink.rows] == [
        (rows[0].client_order_id, OrderStatus.CANCELED)
    ]


# ---------------------------------------------------------------- the ledger's rules


def test_a_final_order_takes_no_later_word_and_is_not_followed() -> None:
    """Once canceled, a stale "resting" total and a fill change nothing, and the order is not
    followed again (the negative twin: before it ended, the same total was taken)."""
    ledger = OrderLedger()
    ledger.track(resting_row(), follow=True)
    canceled = observed_row(
        dataclasses.replace(resting_row(), status=OrderStatus.CANCELED, remaining_count="0.00")
    )
    resting = Observation(
        CLIENT_ORDER_ID, Source.LOOKUP, OrderStatus.ACCEPTED, "0.00", "2.00", "k-1"
    )
    assert ledger.observe(resting, follow=True).row is not None  # the twin: open, taken
    assert ledger.observe(canceled).final
    assert ledger.observe(resting, follow=True).row is None
    assert CLIENT_ORDER_ID not in ledger.followed and ledger.finished(CLIENT_ORDER_ID)


def test_a_counted_source_raises_the_fill_without_telling_the_gate() -> None:
    """Start-up's corrections are counted by the warm start: the ledger takes the fill but owes
    the gate nothing; a later source's extra contract is owed (and only it)."""
    ledger = OrderLedger()
    ledger.track(resting_row())
    said = Observation(
        CLIENT_ORDER_ID, Source.LOOKUP, OrderStatus.FILLED, "1.00", "2.00", "k-1", counted=True
    )
    assert ledger.observe(said).new_fill == 0
    more = dataclasses.replace(said, fill_count="2.00", remaining_count="1.00", counted=False)
    assert ledger.observe(more).new_fill == Decimal(1)


def test_an_unknown_outcome_is_resolved_by_a_later_truth_but_never_lowers_one() -> None:
    """An ``error`` of unknown outcome gives way to the exchange's "accepted"; an unknown
    outcome said after "accepted" changes nothing."""
    ledger = OrderLedger()
    pending = order_row(client_order_id="u" * 32, time_in_force="good_till_canceled")
    ledger.track(pending, counted=False)
    unknown = observed_row(
        dataclasses.replace(
            pending,
            kind=OrderRowKind.RESOLUTION,
            status=OrderStatus.ERROR,
            error_message="outcome unknown: read timed out",
        )
    )
    accepted = Observation("u" * 32, Source.LOOKUP, OrderStatus.ACCEPTED, "0.00", "3.00", "k-9")
    assert ledger.observe(unknown).row is not None
    row = ledger.observe(accepted, follow=True).row
    assert row is not None and row.status is OrderStatus.ACCEPTED
    assert ledger.observe(unknown).row is None
    assert ledger.row("u" * 32) == row


# ---------------------------------------------------------------- finding 6


def test_replay_never_loses_a_kept_filled_record_to_a_committed_accepted_row(
    short_dir: Path,
) -> None:
    """The database holds the order "accepted" (resting), the journal kept its later "filled":
    the replay writes the filled row; replayed again, nothing (the negative twin)."""
    db_path = short_dir / "t.db"
    connection, _ = open_database(db_path)
    try:
        accepted = dataclasses.replace(
            resting_row(), kind=OrderRowKind.RESOLUTION, status=OrderStatus.ACCEPTED
        )
        write_batch(connection, [accepted])
        filled = dataclasses.replace(
            accepted, status=OrderStatus.FILLED, fill_count="3.00", remaining_count="0.00"
        )
        journal = IntentJournal.open(journal_path(db_path))
        journal.append(filled)
        os.close(journal._descriptor)  # as a kill leaves it
        assert replay_journal(connection, db_path).replayed == 1
        found = connection.execute(
            "SELECT status, fill_count FROM orders_fired WHERE client_order_id = ?",
            (CLIENT_ORDER_ID,),
        ).fetchone()
        assert found == ("filled", "3.00")
        assert replay_journal(connection, db_path).replayed == 0
    finally:
        connection.close()


def test_compaction_syncs_the_new_file_before_the_rename_and_the_directory_after(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite fsyncs the staged file, then renames it, then fsyncs the directory: a power cut
    leaves the old journal or the whole new one."""
    path = journal_path(short_dir / "t.db")
    journal = IntentJournal.open(path)
    journal.append(order_row(client_order_id="o" * 32))
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        steps.append("fsync " + os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    def replace(source: Any, target: Any) -> None:
        steps.append("rename")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    journal.compact()
    journal.close()
    staged = str(path.with_name(path.name + ".new"))
    assert steps[:3] == [f"fsync {staged}", "rename", f"fsync {path.parent}"]


async def test_rows_reach_the_sink_in_the_order_their_merges_were_made() -> None:
    """A slow write of the first merge does not let the second's row overtake it: the last row
    written is the ledger's latest (filled 2.00), never the older one (filled 1.00)."""
    release = trio.Event()
    written: list[OrderRow] = []
    calls = [0]

    class SlowFirst:
        async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
            calls[0] += 1
            if calls[0] == 1:
                await release.wait()
            written.append(row)

    keeper = LedgerKeeper(SlowFirst())
    keeper.track(resting_row(), follow=True)
    one, two = (
        Observation(CLIENT_ORDER_ID, Source.LOOKUP, OrderStatus.FILLED, f"{n}.00", f"{3 - n}.00")
        for n in (1, 2)
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keeper.observe, one)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(keeper.observe, two)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert [row.fill_count for row in written] == ["1.00", "2.00"]
    assert keeper.row(CLIENT_ORDER_ID) == written[-1]
