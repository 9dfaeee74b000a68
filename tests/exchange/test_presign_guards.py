"""Which signature from the pool each kind of fire takes, through the real transport: a real
order the freshest, a shadow one (either way it is finished) only a spare above the reserve,
and neither leaves the pool counting an order in flight once it is over.

Written after the transport was made to take the wrong end of the pool and the whole suite still
passed; the pool's own choice is tested in test_presign.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from executor.exchange.messages import ORDER_PATH, OrderStamps
from executor.exchange.orders.presign import SignaturePool
from executor.exchange.orders.transport import ExchangeClient, open_exchange, order_body
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.signer import KalshiSigner
from tests.support.inprocess import fake_endpoint
from tests.support.orders import spec

WAIT_S = 20.0
"""Hang guard (not a timing)."""
SIGN_GAP_S = 0.003
"""Pause after each signature is made, so consecutive signatures carry distinct timestamps."""


@asynccontextmanager
async def client_with_pool(
    exchange: FakeExchange, credentials: FakeCredentials
) -> AsyncIterator[tuple[ExchangeClient, SignaturePool]]:
    """The real transport with a full pool of 3 signatures (2 reserved for real fires), made with
    the fake's key, with no refill running (so each test sees exactly what was taken)."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)

    async def sign(timestamp: str, method: str, path: str) -> str:
        signature = signer.sign(timestamp, method, path)
        await trio.sleep(SIGN_GAP_S)
        return signature

    with trio.fail_after(WAIT_S):
        async with open_exchange(fake_endpoint(exchange, credentials)) as client:
            pool = SignaturePool(sign, max_age_ms=5_000, size=3, reserve=2)
            async with trio.open_nursery() as refill:
                await refill.start(pool.run)
                while len(pool) < pool.size:  # noqa: ASYNC110 - the refill is another task's
                    await trio.sleep(0.001)
                refill.cancel_scope.cancel()
            assert len(set(pool.ready_timestamps())) == 3
            client.signatures = pool
            yield client, pool


def _sent_timestamps(exchange: FakeExchange) -> list[str]:
    return [
        request.headers["kalshi-access-timestamp"]
        for request in exchange.received
        if request.path == ORDER_PATH
    ]


async def test_a_real_order_is_signed_with_the_freshest_signature(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The order the exchange receives carries the newest ready timestamp, and verifies."""
    async with client_with_pool(fake_exchange, fake_credentials) as (client, pool):
        newest = pool.ready_timestamps()[-1]
        stamps = OrderStamps()
        await client.place_order(order_body(spec("1" * 32)), stamps, dry_run=False)
        assert pool.in_flight == 0  # the order is over: refills may run again
    assert stamps.signature == "presigned"
    assert _sent_timestamps(fake_exchange) == [newest]
    assert all(request.verified for request in fake_exchange.received)


async def test_a_shadow_order_takes_only_a_spare_and_holds_nothing_in_flight(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A shadow order (built the lane's way) takes the oldest, the one spare above the reserve;
    the next signs inline, leaving both reserved signatures for the real order, which gets the
    freshest; no take leaves an order counted in flight."""
    async with client_with_pool(fake_exchange, fake_credentials) as (client, pool):
        oldest, *reserved = pool.ready_timestamps()
        first, second = OrderStamps(), OrderStamps()
        await client.place_order(order_body(spec("2" * 32)), first, dry_run=True)
        await client.place_order(order_body(spec("3" * 32)), second, dry_run=True)
        assert (first.signature, second.signature) == ("presigned", "inline")
        assert pool.ready_timestamps() == reserved
        assert (pool.taken, pool.taken_spare, pool.in_flight) == (0, 1, 0)
        await client.place_order(order_body(spec("4" * 32)), OrderStamps(), dry_run=False)
        assert pool.in_flight == 0
    assert oldest not in reserved
    assert _sent_timestamps(fake_exchange) == [reserved[-1]]


async def test_a_shadow_finished_in_the_offer_takes_only_a_spare(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The lane's at-once path (``place_shadow_now``) takes the spare, then finds none, and never
    counts an order in flight."""
    async with client_with_pool(fake_exchange, fake_credentials) as (client, pool):
        reserved = pool.ready_timestamps()[1:]
        assert client.place_shadow_now(order_body(spec("5" * 32)), OrderStamps())
        assert not client.place_shadow_now(order_body(spec("6" * 32)), OrderStamps())
        assert pool.ready_timestamps() == reserved
        assert (pool.taken, pool.in_flight) == (0, 0)
