"""Rate limits as Kalshi counts them: the buckets read from the account, the costs, the order
before everything else, and a limit of two writes a second honoured (counted on a fake clock)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from executor.exchange.book.cancels import cancel_resting
from executor.exchange.book.order_group import create_order_group
from executor.exchange.follow.account import AccountState, poll_account_once
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.messages import (
    BATCH_CANCEL_PATH,
    ORDER_PATH,
    ORDERS_PATH,
    ExchangeError,
    OrderStamps,
    order_body,
)
from executor.exchange.rate_limits import (
    BASIC_TIER,
    ApiLimits,
    BucketLimit,
    RateLimits,
    fetch_api_limits,
    parse_costs,
    parse_limits,
)
from executor.exchange.stream.orders import StreamedOrders
from executor.exchange.token_bucket import TokenBucket
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.rows import LatencyRow, OrderStatus
from tests.exchange.test_reconcile import Rows, sent_row
from tests.support.orders import spec, transport

BATCHED = "/portfolio/events/orders/batched"


def test_limits_and_costs_are_read_as_published() -> None:
    """The guide's own example (premier: read 1000/1000, write 1000/2000) and a cost list with a
    templated path are read as they are written."""
    tier, read, write = parse_limits(
        {
            "usage_tier": "premier",
            "read": {"refill_rate": 1000, "bucket_capacity": 1000},
            "write": {"refill_rate": 1000, "bucket_capacity": 2000},
            "grants": [],
        }
    )
    assert (tier, read, write) == ("premier", BucketLimit(1000, 1000), BucketLimit(1000, 2000))
    default, costs = parse_costs(
        {
            "default_cost": 10,
            "endpoint_costs": [
                {"method": "delete", "path": f"/trade-api/v2{BATCHED}", "cost": 2},
                {"method": "GET", "path": "/portfolio/order_groups/{order_group_id}", "cost": 1},
            ],
        }
    )
    limits = ApiLimits(tier, read, write, default, costs)
    assert limits.cost("DELETE", BATCH_CANCEL_PATH) == 2
    assert limits.cost("GET", "/trade-api/v2/portfolio/order_groups/abc") == 1
    assert limits.cost("GET", "/trade-api/v2/portfolio/order_groups/abc/x") == 10  # not that one
    assert limits.cost("POST", ORDER_PATH) == 10


@pytest.mark.parametrize(
    "payload",
    [
        {"usage_tier": "basic", "read": {"refill_rate": 200}, "write": {}},
        {"usage_tier": "basic", "read": {"refill_rate": 0, "bucket_capacity": 5}, "write": {}},
        {"read": "x", "write": {"refill_rate": 1, "bucket_capacity": 1}},
    ],
)
def test_malformed_limits_are_refused(payload: dict[str, Any]) -> None:
    """A bucket without a positive integer budget is an error, never a bucket of zero."""
    with pytest.raises(ExchangeError):
        parse_limits(payload)


class Answers:
    """A signed reader that answers from a table (an ExchangeError for a missing path)."""

    def __init__(self, answers: Mapping[str, dict[str, Any]]) -> None:
        self.answers = answers

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        if path not in self.answers:
            raise ExchangeError("404 not_found: no endpoint", status=404)
        return self.answers[path]


async def test_without_the_account_limits_the_basic_tier_is_assumed_with_a_warning() -> None:
    """An exchange that cannot say (a 404 here) gives the published Basic tier and one warning;
    its negative twin, an exchange that says, gives its numbers and no warning."""
    with capture_logs() as logs:
        assumed = await fetch_api_limits(Answers({}))
    assert assumed is BASIC_TIER
    assert [entry["log_level"] for entry in logs] == ["warning"]
    answers = Answers(
        {
            "/trade-api/v2/account/limits": {
                "usage_tier": "expert",
                "read": {"refill_rate": 600, "bucket_capacity": 600},
                "write": {"refill_rate": 600, "bucket_capacity": 1200},
                "grants": [],
            },
            "/trade-api/v2/account/endpoint_costs": {"default_cost": 10, "endpoint_costs": []},
        }
    )
    with capture_logs() as logs:
        read = await fetch_api_limits(answers)
    assert (read.usage_tier, read.source) == ("expert", "exchange")
    assert read.write == BucketLimit(600, 1200)
    assert [entry["log_level"] for entry in logs] == ["info"]


async def test_a_waiting_order_goes_before_a_cancel_that_waited_longer(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A cancel's tokens are taken behind every waiting order: drained bucket, a cancel starts
    waiting (its 4 tokens due at 0.4 s), an order arrives at 0.1 s (its 10 due at 1 s), and at
    0.45 s the cancel still waits although its tokens are there; the order is served at 1 s, the
    cancel after it; reads never wait on writes. The clock moves only when the test moves it."""
    costs = {("DELETE", BATCHED): 2}
    limits = RateLimits(ApiLimits("t", BucketLimit(100, 100), BucketLimit(10, 10), costs=costs))
    await limits.write.acquire(10)
    served: list[str] = []

    async def cancel() -> None:
        await limits.take("DELETE", BATCH_CANCEL_PATH, items=2)  # 4 tokens: 2 orders x 2
        served.append("cancel")

    async def order() -> None:
        await limits.write.acquire(limits.order_tokens)
        served.append("order")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(cancel)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(0.1)
        nursery.start_soon(order)
        await trio.testing.wait_all_tasks_blocked()
        await limits.take("GET", ORDERS_PATH)  # the read bucket is untouched by both
        served.append("read")
        for step_s, expected in ((0.35, ["read"]), (0.6, ["read", "order"])):
            mock_clock.jump(step_s)
            await trio.testing.wait_all_tasks_blocked()
            assert served == expected
        mock_clock.jump(0.5)
    assert served == ["read", "order", "cancel"]


async def test_orders_alone_keep_first_come_first_served_with_a_cancel_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The negative twin of the ordering above: with nothing but a cancel waiting, the cancel is
    served once its tokens accrue (it is behind orders, not starved)."""
    bucket = TokenBucket(capacity=10, refill_per_s=10)
    await bucket.acquire(10)
    start = trio.current_time()
    await bucket.acquire_behind(10)
    assert trio.current_time() - start == pytest.approx(1.0)
    assert bucket.waits == 1


def order_count(exchange: FakeExchange) -> int:
    """Order requests the fake has received."""
    return sum(request.path == ORDER_PATH for request in exchange.received)


async def place(client: Any, name: str) -> None:
    """One real order through the transport."""
    await client.place_order(order_body(spec(name * 32, count=1)), OrderStamps(), dry_run=False)


async def test_two_writes_a_second_from_account_limits_are_honoured(
    mock_clock: trio.testing.MockClock,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The fake says write 20 tokens/s, 20 held (two orders a second): on a clock that moves only
    when told, two orders go at once, the third waits in the bucket, unsent, until 0.5 s of the
    clock have passed, and not a moment sooner (the fake's arrival record counts them)."""
    fake_exchange.api_limits.write_refill = fake_exchange.api_limits.write_capacity = 20
    async with transport(fake_exchange, fake_credentials) as client, trio.open_nursery() as n:
        client.use_limits(await fetch_api_limits(client))
        assert (client.limiter.capacity, client.limiter.refill_per_s) == (20, 20)
        await place(client, "1")
        await place(client, "2")
        assert order_count(fake_exchange) == 2
        third_done = trio.Event()

        async def third() -> None:
            await place(client, "3")
            third_done.set()

        n.start_soon(third)
        while client.limiter.waiting == 0:
            await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(0.49)
        await trio.testing.wait_all_tasks_blocked()
        assert order_count(fake_exchange) == 2 and client.limiter.waiting == 1
        mock_clock.jump(0.01)
        await third_done.wait()
        assert order_count(fake_exchange) == 3
        assert client.limiter.waits == 1


async def test_without_the_account_limits_the_third_order_does_not_wait(
    mock_clock: trio.testing.MockClock,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The negative twin: the same fake, its limits not read, the Basic tier's bucket (ten
    orders held) lets the third order straight through: the wait above is the account's."""
    fake_exchange.api_limits.write_refill = fake_exchange.api_limits.write_capacity = 20
    async with transport(fake_exchange, fake_credentials) as client:
        for name in "123":
            await place(client, name)
        assert order_count(fake_exchange) == 3 and client.limiter.waits == 0


class StreamRows(Rows):
    """``Rows`` that also takes the stream's latency rows (none are expected here)."""

    def record(self, row: LatencyRow) -> None:
        raise AssertionError(f"no stream message was applied: {row}")


async def drawn(
    limits: RateLimits, exchange: FakeExchange, step: Callable[[], Awaitable[object]]
) -> tuple[float, float, int, int]:
    """The read and write tokens ``step`` took, and the GET and other requests the fake received
    meanwhile (the clock stands still: no token comes back during the step)."""
    read, write, received = (
        limits.read.available(),
        limits.write.available(),
        len(exchange.received),
    )
    await step()
    requests = exchange.received[received:]
    gets = sum(request.method == "GET" for request in requests)
    return (
        read - limits.read.available(),
        write - limits.write.available(),
        gets,
        len(requests) - gets,
    )


async def test_reads_draw_on_the_read_bucket_and_writes_on_the_write_bucket(
    mock_clock: trio.testing.MockClock,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The account poll, the poll's lookup of a resting order and the stream's reconciliation
    take 10 read tokens per GET they send and no write token; an order, a batch cancel and an
    order group's creation take 10 write tokens per request and no read token."""
    sink = StreamRows()
    client_order_id = "d" * 32
    async with transport(fake_exchange, fake_credentials) as client:
        client.use_limits(ApiLimits("test", BucketLimit(1, 10_000), BucketLimit(1, 10_000)))
        limits = client.rest.limits
        reconciler = Reconciler(client, sink, delays_s=(0.0, 0.0, 0.0))
        gtc = spec(client_order_id, time_in_force="good_till_canceled")

        async def order() -> None:
            await client.place_order(order_body(gtc), OrderStamps(), dry_run=False)
            reconciler.follow(
                sent_row(
                    client_order_id,
                    status=OrderStatus.ACCEPTED,
                    error_message=None,
                    time_in_force="good_till_canceled",
                    remaining_count="3.00",
                )
            )

        async def cancel() -> None:
            row = reconciler.followed.get(client_order_id)
            assert row is not None and row.kalshi_order_id  # the lookup took the exchange's id
            report = await cancel_resting(client.rest, [row], sink, reason="test")
            assert report.canceled == 1

        writes: dict[str, Callable[[], Awaitable[object]]] = {
            "order": order,
            "group": lambda: create_order_group(client.rest, 5),
        }
        reads: dict[str, Callable[[], Awaitable[object]]] = {
            "account poll": lambda: poll_account_once(client, AccountState(), None),
            "poll's lookup": reconciler.poll_resting,
            "stream's reconciliation": StreamedOrders(reconciler, sink).reconcile_followed,
        }
        taken = {name: await drawn(limits, fake_exchange, step) for name, step in writes.items()}
        taken |= {name: await drawn(limits, fake_exchange, step) for name, step in reads.items()}
        taken["cancel"] = await drawn(limits, fake_exchange, cancel)
    for name in [*writes, "cancel"]:
        read_tokens, write_tokens, gets, others = taken[name]
        assert (read_tokens, gets, others) == (0, 0, 1), name
        assert write_tokens == 10, name
    for name in reads:
        read_tokens, write_tokens, gets, others = taken[name]
        assert (write_tokens, others) == (0, 0) and gets >= 1, name
        assert read_tokens == 10 * gets, name
