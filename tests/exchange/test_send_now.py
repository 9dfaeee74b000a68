"""A real order's first attempt written without waiting (``ExchangeClient.send_order_now``), over
the in-process fake exchange: written whole before anything is awaited, answered through
``place_order(started=...)``, and refused (touching nothing) whenever it would have to wait."""

from __future__ import annotations

import orjson
import pytest
import trio

from executor.exchange.messages import OrderStamps
from executor.exchange.orders.transport import open_exchange
from executor.exchange.token_bucket import TokenBucket
from executor.fake.exchange import FakeCredentials, FakeExchange
from tests.exchange.test_order_connection import WAIT_S, _body, _orders
from tests.support.inprocess import fake_endpoint


async def test_an_order_is_on_the_wire_before_anything_is_awaited(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """With a warm connection and a token, the request is written whole inside the call."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, order_connections=1) as client:
            stamps = OrderStamps()
            tokens_before = client.limiter.available()
            started = client.send_order_now(_body(7), stamps)
            assert started is not None
            assert stamps.wire_ns is not None and stamps.sent_ns is not None  # no await yet
            assert stamps.sent_ns <= stamps.wire_ns and stamps.attempts == 1
            assert client.limiter.available() < tokens_before  # its token was taken
            assert client.orders.idle == 0  # its connection is in use
            response = await client.place_order(_body(7), stamps, dry_run=False, started=started)
            assert stamps.ack_ns is not None and stamps.attempts == 1
            assert client.orders.idle == 1  # back for the next order
    (order,) = _orders(fake_exchange)
    assert order.status == 201
    assert orjson.loads(order.body)["client_order_id"] == f"{7:032x}"
    assert response["client_order_id"] == f"{7:032x}"


async def test_no_idle_connection_no_immediate_write_and_nothing_taken(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Without a warm connection it returns None with every token there; the task sends it."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
            stamps = OrderStamps()
            assert client.send_order_now(_body(8), stamps) is None
            assert client.limiter.available() == client.limiter.capacity
            assert stamps.attempts == 0 and stamps.sent_ns is None
            await client.place_order(_body(8), stamps, dry_run=False)  # opens one on demand
            assert stamps.attempts == 1 and stamps.wire_ns is not None
    assert len(_orders(fake_exchange)) == 1


async def test_no_token_free_no_immediate_write_and_the_connection_stays_idle(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """With the bucket empty it returns None and gives the connection back unused."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    bucket = TokenBucket(capacity=10.0, refill_per_s=0.001)
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint, order_connections=1, limiter=bucket) as client:
            await client.place_order(_body(1), OrderStamps(), dry_run=False)  # the 10 tokens
            assert client.orders.idle == 1
            stamps = OrderStamps()
            assert client.send_order_now(_body(2), stamps) is None
            assert client.orders.idle == 1  # given back unused
            assert stamps.attempts == 0 and stamps.sent_ns is None
    assert len(_orders(fake_exchange)) == 1


def test_try_acquire_takes_only_what_is_there() -> None:
    """try_acquire takes tokens when they are there and nobody waits, and refuses otherwise."""
    bucket = TokenBucket(capacity=20.0, refill_per_s=0.001)

    async def main() -> None:
        assert bucket.try_acquire(10.0) and bucket.try_acquire(10.0)
        assert not bucket.try_acquire(10.0)  # the twin: empty, nothing taken
        assert bucket.available() < 10.0
        with pytest.raises(ValueError):
            bucket.try_acquire(30.0)

    trio.run(main)
