"""Orders for the tests that place them over TLS against the fake exchange: the order spec, and
the real transport opened on the fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from executor.exchange.messages import OrderSpec
from executor.exchange.orders.transport import ExchangeClient, open_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange
from tests.support.inprocess import fake_endpoint

TICKER = "KXTEST-26JAN01-T1"
"""The market the sample orders trade."""


def spec(client_order_id: str = "a" * 32, **overrides: Any) -> OrderSpec:
    """A three-contract yes order at $0.42 on ``TICKER``, fill_or_kill (``overrides`` applied)."""
    fields: dict[str, Any] = {
        "ticker": TICKER,
        "client_order_id": client_order_id,
        "side": "bid",
        "count": 3,
        "price": "0.4200",
        "time_in_force": "fill_or_kill",
        "self_trade_prevention_type": "taker_at_cross",
        "exchange_index": 0,
    }
    fields.update(overrides)
    return OrderSpec(**fields)


@asynccontextmanager
async def transport(
    exchange: FakeExchange, credentials: FakeCredentials
) -> AsyncIterator[ExchangeClient]:
    """The real transport, pre-warmed against ``exchange`` (20 s: a hang guard, not a timing;
    reconciliation's lookups take a few seconds inside it)."""
    with trio.fail_after(20):
        async with open_exchange(fake_endpoint(exchange, credentials)) as client:
            yield client
