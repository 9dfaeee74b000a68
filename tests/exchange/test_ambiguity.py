"""Which failed orders may have been placed (``maybe_placed``): the ones reconciliation asks about.

A definite answer (a 4xx, a 429, a connect failure) needs no question; a timeout after sending,
a connection lost after sending, a 5xx on the last attempt, or a 2xx the client cannot read do.
Over real TLS against the fake exchange.
"""

from __future__ import annotations

import socket

import pytest
import trio

from executor.exchange.messages import ExchangeAmbiguous, ExchangeError, ExchangeTimeout
from executor.exchange.orders.transport import (
    ExchangeEndpoint,
    OrderSpec,
    OrderStamps,
    RetryPolicy,
    open_exchange,
    order_body,
)
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault
from executor.signer import KalshiSigner
from tests.support.inprocess import fake_endpoint

ONE_ATTEMPT = RetryPolicy(max_attempts=1)
FAST_RETRY = RetryPolicy(base_delay_s=0.001, max_delay_s=0.001)


def body() -> bytes:
    """A valid one-contract order body."""
    return order_body(
        OrderSpec(
            ticker="KXTEST-26JAN01-T1",
            client_order_id="a" * 32,
            side="bid",
            count=1,
            price="0.4200",
            time_in_force="fill_or_kill",
            self_trade_prevention_type="taker_at_cross",
            exchange_index=0,
        )
    )


@pytest.mark.parametrize(
    ("status", "maybe_placed"), [(400, False), (409, True), (429, False), (500, True), (503, True)]
)
async def test_a_status_says_whether_the_order_may_have_been_placed(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, status: int, maybe_placed: bool
) -> None:
    """A 4xx or 429 is a refusal; a 5xx may have been acted on; a 409 on an order says it
    already exists (placed, by an earlier attempt or delivery)."""
    fake_exchange.inject(Fault("status", status=status))
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=ONE_ATTEMPT
        ) as client:
            with pytest.raises(ExchangeError) as caught:
                await client.place_order(body(), stamps, dry_run=False)
    assert caught.value.status == status
    assert caught.value.maybe_placed is maybe_placed
    assert stamps.maybe_placed is maybe_placed


async def test_a_5xx_before_a_final_refusal_still_leaves_the_outcome_unknown(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """503, then 400 on the resend: the first attempt may have placed it, so the order's
    outcome is unknown though the last answer was a refusal."""
    fake_exchange.inject(Fault("status", status=503), Fault("status", status=400))
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=FAST_RETRY
        ) as client:
            with pytest.raises(ExchangeError) as caught:
                await client.place_order(body(), stamps, dry_run=False)
    assert caught.value.status == 400 and not caught.value.maybe_placed
    assert stamps.attempts == 2 and stamps.maybe_placed


async def test_a_success_after_a_5xx_is_definite(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The negative twin: a retried order that is answered needs no reconciliation; the flag
    records the attempt, and the answer (not the flag) decides."""
    fake_exchange.inject(Fault("status", status=503))
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=FAST_RETRY
        ) as client:
            response = await client.place_order(body(), stamps, dry_run=False)
    assert response["fill_count"] == "1.00" and stamps.attempts == 2


async def test_a_refused_connection_sent_nothing(fake_credentials: FakeCredentials) -> None:
    """Nothing listening: a connect failure, which cannot have placed anything."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    endpoint = ExchangeEndpoint(
        f"https://127.0.0.1:{port}", fake_credentials.key_id, signer, fake_credentials.ca_file
    )
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(endpoint, prewarm=False, retry=ONE_ATTEMPT) as client:
            with pytest.raises(ExchangeError, match="connection error") as caught:
                await client.place_order(body(), stamps, dry_run=False)
    assert not caught.value.maybe_placed and not stamps.maybe_placed


def test_the_defaults_follow_the_status() -> None:
    """Without a word from the transport, a 5xx may have placed, anything else not; a timeout
    may have, unless the transport says the request never left."""
    assert ExchangeError("x", status=502).maybe_placed
    assert not ExchangeError("x", status=404).maybe_placed
    assert not ExchangeError("x").maybe_placed
    assert ExchangeTimeout("x").maybe_placed and ExchangeAmbiguous("x").maybe_placed
    assert not ExchangeTimeout("x", maybe_placed=False).maybe_placed
