"""``KALSHI_ORDER_CANCEL_ON_PAUSE`` from the variable to the order's bytes: the setting is read
as ``executor serve`` reads it, an in-process executor trades with it against the fake exchange
over TLS, and the order the fake receives carries it."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
import pytest
import trio

from executor.config.settings import add_exchange_arguments, load_settings
from executor.exchange.orders.transport import ORDER_PATH
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.wire.client import connect
from tests.service.test_fire_e2e import real_wake, settings_for, start_trading, wait_for_order


def serve_arguments() -> argparse.Namespace:
    """``executor serve --exchange fake``'s exchange flags, parsed."""
    parser = argparse.ArgumentParser()
    add_exchange_arguments(parser)
    parser.add_argument("--contract-count", type=int, default=None)
    return parser.parse_args(["--exchange", "fake"])


@pytest.mark.parametrize(
    ("environ", "sent"),
    [
        ({"KALSHI_ORDER_CANCEL_ON_PAUSE": "false"}, False),
        ({}, True),
    ],
    ids=["false", "unset"],
)
async def test_the_pause_variable_reaches_the_order_body(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    environ: dict[str, str],
    sent: bool,
) -> None:
    """``KALSHI_ORDER_CANCEL_ON_PAUSE=false`` makes a real order carry ``cancel_order_on_pause``
    false; unset, the order carries true (the exchange cancels it when trading pauses)."""
    book = load_settings(serve_arguments(), environ).exchange.book
    assert book.cancel_order_on_pause is sent
    settings = settings_for(fake_exchange, fake_credentials, book=book)
    running = await start_trading(
        nursery, short_dir, fake_exchange, fake_credentials, settings=settings
    )
    async with connect(running.socket_path) as client:
        await client.request(real_wake("paused"))
        await wait_for_order(fake_exchange)
    await running.shutdown()
    [posted] = [
        orjson.loads(request.body)
        for request in fake_exchange.received
        if request.method == "POST" and request.path == ORDER_PATH
    ]
    assert posted["cancel_order_on_pause"] is sent
