"""The fake's ``GET /portfolio/orders`` (filters, cursor, signature), its resting orders, and the
faults reconciliation is tested with, in-process and from the command line.

Requests cross real TLS to the fake through the transport's signed ``get_json``.
"""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import executor.exchange.orders.transport as transport_module
from executor.clock import wall_ms
from executor.exchange.orders.transport import (
    ORDERS_PATH,
    ExchangeAmbiguous,
    ExchangeClient,
    ExchangeEndpoint,
    ExchangeError,
    ExchangeTimeout,
    OrderSpec,
    OrderStamps,
    open_exchange,
    order_body,
)
from executor.fake.book.account import ORDERS_PATH as FAKE_ORDERS_PATH
from executor.fake.book.orders import ORDERS_PAGE_SIZE
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault, never_fill
from executor.signer import KalshiSigner
from tests.support.orders import TICKER, spec, transport

PUBLISHED_ORDER_FIELDS = {
    "order_id",
    "user_id",
    "client_order_id",
    "ticker",
    "outcome_side",
    "book_side",
    "type",
    "status",
    "yes_price_dollars",
    "no_price_dollars",
    "fill_count_fp",
    "remaining_count_fp",
    "initial_count_fp",
    "taker_fees_dollars",
    "maker_fees_dollars",
    "taker_fill_cost_dollars",
    "maker_fill_cost_dollars",
}
"""The ``Order`` schema's required fields (get-orders.yaml): every listed order must carry them."""


async def place(client: ExchangeClient, order: OrderSpec) -> dict[str, Any]:
    """Place ``order`` through the transport."""
    return await client.place_order(order_body(order), OrderStamps(), dry_run=False)


async def list_all(client: ExchangeClient, **params: str) -> list[dict[str, Any]]:
    """Every listed order for ``params``, following the cursor."""
    orders: list[dict[str, Any]] = []
    while True:
        page = await client.get_json(ORDERS_PATH, params)
        assert set(page) == {"orders", "cursor"} and isinstance(page["cursor"], str)
        orders.extend(page["orders"])
        if not page["cursor"]:
            return orders
        params = {**params, "cursor": page["cursor"]}


def test_the_fake_and_the_transport_agree_on_the_orders_path() -> None:
    """The fake writes the orders path out itself; it must be the transport's."""
    assert FAKE_ORDERS_PATH == ORDERS_PATH == "/trade-api/v2/portfolio/orders"


async def test_a_filled_order_is_listed_with_its_cost_and_fees(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A filled bid is ``executed``, 3 of 3 filled at $0.42 a contract, with the taker fee."""
    async with transport(fake_exchange, fake_credentials) as client:
        response = await place(client, spec("a" * 32))
        (listed,) = await list_all(client, ticker=TICKER)
    assert set(listed) >= PUBLISHED_ORDER_FIELDS
    assert listed["order_id"] == response["order_id"]
    assert listed["client_order_id"] == "a" * 32
    assert (listed["status"], listed["outcome_side"], listed["book_side"]) == (
        "executed",
        "yes",
        "bid",
    )
    assert (listed["fill_count_fp"], listed["remaining_count_fp"]) == ("3.00", "0.00")
    assert listed["initial_count_fp"] == "3.00"
    assert (listed["yes_price_dollars"], listed["no_price_dollars"]) == ("0.4200", "0.5800")
    assert listed["taker_fill_cost_dollars"] == "1.2600"
    assert Decimal(listed["taker_fees_dollars"]) == 3 * Decimal(response["average_fee_paid"])
    assert listed["created_time"].endswith("Z")


async def test_a_killed_order_is_canceled_and_an_ask_is_a_no(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A kill lists as ``canceled`` with nothing filled; an ask is outcome_side ``no``."""
    fake_exchange.fill_rule = never_fill
    async with transport(fake_exchange, fake_credentials) as client:
        await place(client, spec("b" * 32, side="ask"))
        (listed,) = await list_all(client, ticker=TICKER)
    assert (listed["status"], listed["fill_count_fp"], listed["remaining_count_fp"]) == (
        "canceled",
        "0.00",
        "0.00",
    )
    assert (listed["outcome_side"], listed["book_side"]) == ("no", "ask")
    assert listed["taker_fill_cost_dollars"] == "0.0000"


async def test_the_list_filters_by_ticker_and_pages_with_a_cursor(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Five orders on one ticker come back over three pages, newest first; others are left out."""
    ids = [f"{n:032x}" for n in range(5)]
    async with transport(fake_exchange, fake_credentials) as client:
        for client_order_id in ids:
            await place(client, spec(client_order_id))
        await place(client, spec("f" * 32, ticker="KXOTHER-26JAN01-T1"))
        listed = await list_all(client, ticker=TICKER)
        first_page = await client.get_json(ORDERS_PATH, {"ticker": TICKER})
    assert ORDERS_PAGE_SIZE == 2 and len(first_page["orders"]) == 2 and first_page["cursor"]
    assert sorted(order["client_order_id"] for order in listed) == ids
    times = [order["created_time"] for order in listed]
    assert times == sorted(times, reverse=True)


async def test_min_ts_leaves_out_older_orders(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """``min_ts`` (Unix seconds) keeps orders made at or after it: an hour ahead keeps none."""
    async with transport(fake_exchange, fake_credentials) as client:
        await place(client, spec("c" * 32))
        created_s = fake_exchange.book["c" * 32].created_ms // 1000
        at = await list_all(client, ticker=TICKER, min_ts=str(created_s))
        later = await list_all(client, ticker=TICKER, min_ts=str(created_s + 3600))
    assert [order["client_order_id"] for order in at] == ["c" * 32]
    assert later == []


async def test_a_bad_query_is_a_400_naming_the_parameter(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A non-numeric ``min_ts``, a limit of 0 or a bad cursor is refused with a 400 that says so."""
    async with transport(fake_exchange, fake_credentials) as client:
        for params, named in (
            ({"min_ts": "soon"}, "min_ts"),
            ({"limit": "0"}, "limit"),
            ({"cursor": "x"}, "cursor"),
            ({"status": "open"}, "status"),
        ):
            with pytest.raises(ExchangeError, match=named) as caught:
                await client.get_json(ORDERS_PATH, params)
            assert caught.value.status == 400


async def test_the_list_is_signed_like_every_request(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, tmp_path: Path
) -> None:
    """A list signed with another key is a 401; the fake verified the transport's signature."""
    stranger = FakeCredentials.generate(tmp_path / "stranger")
    signer = KalshiSigner(stranger.private_key_path, fake_credentials.key_id)
    endpoint = ExchangeEndpoint(
        fake_exchange.base_url, fake_credentials.key_id, signer, fake_credentials.ca_file
    )
    async with open_exchange(endpoint, prewarm=False) as client:
        with pytest.raises(ExchangeError) as caught:
            await client.get_json(ORDERS_PATH, {"ticker": TICKER})
    assert caught.value.status == 401
    async with transport(fake_exchange, fake_credentials) as client:
        await client.get_json(ORDERS_PATH, {"ticker": TICKER})
    listing = [r for r in fake_exchange.received if r.path == ORDERS_PATH]
    assert [r.verified for r in listing] == [False, True]
    assert "ticker=" + TICKER in listing[-1].query


async def test_a_resting_order_fills_later_and_moves_the_account(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A good_till_canceled order rests; filled later as a maker it is executed, debited once."""
    async with transport(fake_exchange, fake_credentials) as client:
        await place(client, spec("d" * 32, time_in_force="good_till_canceled"))
        (resting,) = await list_all(client, ticker=TICKER, status="resting")
        balance = fake_exchange.balance_cents
        fake_exchange.fill_resting("d" * 32, "1")
        (partly,) = await list_all(client, ticker=TICKER)
        fake_exchange.fill_resting("d" * 32)
        (done,) = await list_all(client, ticker=TICKER)
    assert (resting["fill_count_fp"], resting["remaining_count_fp"]) == ("0.00", "3.00")
    assert (partly["status"], partly["fill_count_fp"], partly["remaining_count_fp"]) == (
        "resting",
        "1.00",
        "2.00",
    )
    assert (done["status"], done["fill_count_fp"], done["remaining_count_fp"]) == (
        "executed",
        "3.00",
        "0.00",
    )
    assert done["maker_fill_cost_dollars"] == "1.2600"
    assert balance - fake_exchange.balance_cents == 126
    assert fake_exchange.positions[TICKER] == 3.0
    with pytest.raises(ValueError, match="not resting"):
        fake_exchange.fill_resting("d" * 32)


async def test_a_resting_order_can_be_cancelled(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Cancelling a resting order lists it ``canceled`` with nothing remaining."""
    async with transport(fake_exchange, fake_credentials) as client:
        await place(client, spec("e" * 32, time_in_force="good_till_canceled"))
        fake_exchange.cancel_resting("e" * 32)
        (listed,) = await list_all(client, ticker=TICKER)
    assert (listed["status"], listed["remaining_count_fp"]) == ("canceled", "0.00")
    with pytest.raises(ValueError, match="not resting"):
        fake_exchange.cancel_resting("e" * 32)


async def test_a_hang_after_place_is_placed_but_never_answered(
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The order times out at the client and is listed by the exchange: the ambiguous case."""
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.5)
    fake_exchange.inject(Fault("hang", place=True))
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeTimeout) as caught:
            await place(client, spec("1" * 32))
        listed = await list_all(client, ticker=TICKER)
    assert caught.value.maybe_placed
    assert [order["client_order_id"] for order in listed] == ["1" * 32]


async def test_a_hang_without_place_lists_nothing(
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The negative twin: an order the fake never placed is not listed."""
    monkeypatch.setattr(transport_module, "ORDER_TIMEOUT_S", 0.5)
    fake_exchange.inject(Fault("hang"))
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeTimeout):
            await place(client, spec("2" * 32))
        assert await list_all(client, ticker=TICKER) == []


async def test_a_drop_after_place_is_placed_and_the_connection_closed(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A dropped connection after placing: the client sees an ambiguous order that may have been
    placed, sent once and never re-sent by the transport (issue 16), and the exchange lists it."""
    fake_exchange.inject(Fault("drop", place=True))
    stamps = OrderStamps()
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeAmbiguous) as caught:
            await client.place_order(order_body(spec("3" * 32)), stamps, dry_run=False)
        listed = await list_all(client, ticker=TICKER)
    assert caught.value.maybe_placed and stamps.maybe_placed
    assert stamps.attempts == 1
    assert [order["client_order_id"] for order in listed] == ["3" * 32]
    assert fake_exchange.balance_cents == 100_000 - 126 - 6  # charged once (3 x $0.02 fee)


async def test_a_status_fault_after_place_places_the_order_and_answers_the_status(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """``Fault("status", place=True)``: the order is placed (listed, charged) and the answer is
    the injected status, here a 201 with an error object and no order; without ``place`` the
    same fault places nothing (its twin)."""
    fake_exchange.inject(
        Fault("status", status=201, code="some_code", message="no order here", place=True),
        Fault("status", status=201, code="some_code", message="no order here"),
    )
    async with transport(fake_exchange, fake_credentials) as client:
        placed = await place(client, spec("7" * 32))
        not_placed = await place(client, spec("8" * 32))
        listed = await list_all(client, ticker=TICKER)
    assert placed == not_placed == {"code": "some_code", "message": "no order here"}
    assert [order["client_order_id"] for order in listed] == ["7" * 32]


def test_the_command_queues_faults_for_the_first_orders(tmp_path: Path) -> None:
    """``--fault hang-after-place``: the first order is placed and never answered, the second
    is answered, and both are listed."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "executor.fake", "--port", "0", "--dir", str(tmp_path)),
            *("--fault", "hang-after-place"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        world = json.loads(process.stdout.readline())
        outcome = trio.run(_hang_then_answer, world)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
    assert outcome == ("timeout", ["5" * 32, "4" * 32])
    assert process.returncode == 0


async def _hang_then_answer(world: dict[str, str]) -> tuple[str, list[str]]:
    signer = KalshiSigner(Path(world["private_key_path"]), world["key_id"])
    endpoint = ExchangeEndpoint(world["base_url"], world["key_id"], signer, Path(world["ca_file"]))
    first = "answered"
    with trio.fail_after(20):
        async with open_exchange(endpoint) as client:
            try:
                await place(client, spec("4" * 32))
            except ExchangeTimeout:
                first = "timeout"
            await place(client, spec("5" * 32))
            listed = await list_all(client, ticker=TICKER)
    return first, [order["client_order_id"] for order in listed]


async def test_the_list_refuses_other_methods(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The orders list is GET only: a POST to it is a 405."""
    context = ssl.create_default_context(cafile=str(fake_credentials.ca_file))
    async with httpx.AsyncClient(base_url=fake_exchange.base_url, verify=context) as bare:
        signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
        timestamp = str(wall_ms())
        headers = {
            "KALSHI-ACCESS-KEY": fake_credentials.key_id,
            "KALSHI-ACCESS-TIMESTAMP": timestamp,
            "KALSHI-ACCESS-SIGNATURE": signer.sign(timestamp, "POST", ORDERS_PATH),
        }
        response = await bare.post(ORDERS_PATH, headers=headers, content=b"{}")
    assert response.status_code == 405
