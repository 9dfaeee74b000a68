"""The book's behaviours issue 36 found unguarded: cancels' rows and batches, the guard's looks
and its exit cancels. Each test was seen failing on a defect made on purpose.

The cancels run over TLS on the fake exchange; the guard's looks run against a writer and a
reconciler of plain objects, on Trio's mock clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import orjson
import trio
import trio.testing
from structlog.testing import capture_logs

from executor.exchange.book.cancels import cancel_resting, canceled_row
from executor.exchange.book.guard import EXIT_CANCEL_TIMEOUT_S, BookGuard
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.follow.reconcile_terms import CollectedRows
from executor.exchange.messages import BATCH_CANCEL_PATH
from executor.exchange.rate_limits import ApiLimits, BucketLimit, RateLimits
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.rows import OrderRow, OrderStatus
from executor.runtime.kill_switch import KillSwitch
from tests.exchange.test_cancels import BATCHED, accepted_row, rest
from tests.support.orders import transport

# ---------------------------------------------------------------- cancels


def test_a_cancelled_order_with_a_known_partial_fill_is_recorded_filled_with_that_fill() -> None:
    """One of three contracts filled and known to the row, the rest cancelled: the row says
    filled with 1.00 and keeps its (right) averages."""
    row = dataclasses.replace(
        accepted_row("k" * 32, "o"),
        fill_count="1.00",
        remaining_count="2.00",
        average_fill_price="0.4200",
        average_fee_paid="0.0100",
    )
    written = canceled_row(row, "2.00", "why")
    assert (written.status, written.fill_count, written.remaining_count) == (
        OrderStatus.FILLED,
        "1.00",
        "0.00",
    )
    assert (written.average_fill_price, written.average_fee_paid) == ("0.4200", "0.0100")


async def test_a_fill_first_learned_from_a_cancel_gets_the_exchanges_averages(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The row says nothing filled but carries stale averages; the fake filled one contract:
    the cancelled row's averages are the exchange's (looked up), not the stale ones."""
    async with transport(fake_exchange, fake_credentials) as client:
        fresh = await rest(client, "s")
        row = dataclasses.replace(fresh, average_fill_price="0.9900", average_fee_paid="0.0500")
        fake_exchange.fill_resting(row.client_order_id, "1")
        sink = CollectedRows()
        await cancel_resting(client.rest, [row], sink, reason="r")
    (written,) = sink.rows
    assert (written.status, written.fill_count) == (OrderStatus.FILLED, "1.00")
    # The fake's maker fill: at the order's price, without a fee.
    assert (written.average_fill_price, written.average_fee_paid) == ("0.4200", "0.0000")


async def test_three_orders_in_batches_of_two_go_as_two_then_one_each_named_once(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A bucket that fits two cancels a batch: the batches name 2 then 1 orders, every order
    exactly once."""
    async with transport(fake_exchange, fake_credentials) as client:
        rows = [await rest(client, name) for name in "ijk"]
        limits = ApiLimits(
            "tiny", BucketLimit(200, 200), BucketLimit(400, 4), costs={("DELETE", BATCHED): 2}
        )
        client.use_limits(limits)
        await cancel_resting(client.rest, rows, CollectedRows(), reason="r")
    bodies = [
        orjson.loads(request.body)["orders"]
        for request in fake_exchange.received
        if request.path == BATCH_CANCEL_PATH
    ]
    assert [len(batch) for batch in bodies] == [2, 1]
    named = [entry["order_id"] for batch in bodies for entry in batch]
    assert sorted(named) == sorted(row.kalshi_order_id for row in rows)


class CountingWriter:
    """A book writer that answers every batch cancel as done and records each write's items,
    taking the tokens as the real one does."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self.items: list[int] = []

    async def send_json(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        items: int = 1,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        await self.limits.take(method, path, items)
        self.items.append(items)
        ids = [entry["order_id"] for entry in orjson.loads(body or b"{}").get("orders", [])]
        return {"orders": [{"order_id": oid, "reduced_by": "3.00", "ts_ms": 1} for oid in ids]}

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        raise AssertionError("no lookup expected")


async def test_a_batch_of_n_cancels_costs_n_times_the_per_item_tokens(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Three cancels in one batch at 2 tokens each take 6 tokens of a 10-token bucket: the
    batch says items=3, and a write of 5 tokens after it must wait (4 are left)."""
    limits = RateLimits(
        ApiLimits("t", BucketLimit(100, 100), BucketLimit(10, 10), costs={("DELETE", BATCHED): 2})
    )
    writer = CountingWriter(limits)
    rows = [accepted_row(name * 32, f"o-{name}") for name in "abc"]
    await cancel_resting(writer, rows, CollectedRows(), reason="r")
    assert writer.items == [3]
    assert limits.write.available() == 4
    assert not limits.write.try_acquire(5)


# ---------------------------------------------------------------- the guard


class Followed:
    """The part of the reconciler the guard uses: the followed rows."""

    def __init__(self, rows: list[OrderRow]) -> None:
        self.followed = {row.client_order_id: row for row in rows}


def engaged_guard(
    tmp_path: Path, writer: CountingWriter, followed: Followed, sink: CollectedRows | None = None
) -> BookGuard:
    """A guard with an engaged switch that cancels on engage and has no group; its cancelled
    rows go to ``sink``."""
    switch = KillSwitch(tmp_path / "halt", ttl_s=0)
    switch.engage("test")
    return BookGuard(
        writer,
        cast(Reconciler, followed),
        sink or CollectedRows(),
        group=None,
        kill_switch=switch,
        audit=None,
        cancel_on_engage=True,
        trigger_on_engage=False,
    )


async def test_an_order_that_gets_its_id_after_a_look_is_cancelled_at_a_later_look(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Engaged, the first looks find the order without an exchange id (nothing to name: no
    batch, and ONE log line however many looks); once the id is known a later look cancels it."""
    writer = CountingWriter(RateLimits())
    unnamed = accepted_row("n" * 32, None)
    followed = Followed([unnamed])
    sink = CollectedRows()
    guard = engaged_guard(tmp_path, writer, followed, sink)
    with capture_logs() as logs:
        for _ in range(3):
            await guard.look()
    assert writer.items == []
    assert [line["event"] for line in logs] == ["resting orders cancelled"]
    followed.followed[unnamed.client_order_id] = dataclasses.replace(unnamed, kalshi_order_id="o")
    await guard.look()
    assert writer.items == [1] and guard.cancels_sent == 1
    assert [(row.client_order_id, row.status) for row in sink.rows] == [
        (unnamed.client_order_id, OrderStatus.CANCELED)
    ]


async def test_the_exit_cancels_run_inside_a_cancelled_scope_within_their_deadline(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The exit cancels called from a scope already cancelled (an exit a failing sibling caused)
    still send their batch, and a batch the exchange never answers ends at the deadline."""

    class SilentWriter(CountingWriter):
        async def send_json(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            self.items.append(kwargs.get("items", 1))
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    writer = SilentWriter(RateLimits())
    guard = engaged_guard(tmp_path, writer, Followed([accepted_row("e" * 32, "o-e")]))
    started = trio.current_time()
    with trio.CancelScope() as scope:
        scope.cancel()
        with capture_logs():
            await guard.cancel_at_exit()
    assert writer.items == [1]
    assert trio.current_time() - started == EXIT_CANCEL_TIMEOUT_S


async def test_an_exit_batch_starts_only_while_its_whole_request_budget_is_left(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Thirty orders, batches of twenty, an exchange taking 3 s a batch: the first batch goes,
    the second would not fit its 10 s request budget in what is left, so it is not started
    (one line says the rest stay for the next start); nothing is cut mid-request."""

    class SlowWriter(CountingWriter):
        async def send_json(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            await trio.sleep(3.0)
            return await super().send_json(*args, **kwargs)

    writer = SlowWriter(RateLimits())
    rows = [accepted_row(f"{index:032d}", f"o-{index}") for index in range(30)]
    guard = engaged_guard(tmp_path, writer, Followed(rows))
    with capture_logs() as logs:
        await guard.cancel_at_exit()
    assert writer.items == [20]
    out_of_time = [line for line in logs if line["event"].startswith("exit cancels out of time")]
    assert [line["left"] for line in out_of_time] == [10]
