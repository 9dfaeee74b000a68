"""Every answer of the fake exchange validates against Kalshi's published OpenAPI.

The schema files are Kalshi's, vendored unchanged in ``tests/published/kalshi-openapi/``. Validation
is strict (no property the schema does not declare) except for the published 429 example, which is
not in the ``ErrorResponse`` shape. Requests go over real TLS, signed, through a bare httpx client,
so each test sees the exact bytes the fake sent.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest

from executor.fake.book.account import (
    BATCH_CANCEL_PATH,
    ENDPOINTS,
    ONE_ORDER_PATH,
    ORDER_EXISTS_CODE,
    ORDER_EXISTS_MESSAGE,
    ORDER_GROUPS_PATH,
    USER_DATA_TIMESTAMP_PATH,
    FakeAccount,
)
from executor.fake.exchange import (
    BALANCE_PATH,
    ORDER_PATH,
    POSITIONS_PATH,
    FakeCredentials,
    FakeExchange,
    Fault,
)
from executor.signer import KalshiSigner
from tests.support.openapi import validate_response

Call = tuple[str, str, bytes | None]


def order(client_order_id: str | None = "c" * 32, **overrides: Any) -> bytes:
    """A schema-valid order body (three contracts at $0.42, fill_or_kill)."""
    fields: dict[str, Any] = {
        "ticker": "KXTEST-26JAN01-T1",
        "client_order_id": client_order_id,
        "side": "bid",
        "count": "3.00",
        "price": "0.4200",
        "time_in_force": "fill_or_kill",
        "self_trade_prevention_type": "taker_at_cross",
        "exchange_index": 0,
    }
    fields.update(overrides)
    return orjson.dumps({key: value for key, value in fields.items() if value is not None})


@asynccontextmanager
async def signed_client(
    exchange: FakeExchange, credentials: FakeCredentials
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client that signs every request with the fake's key and trusts its CA."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)

    async def sign(request: httpx.Request) -> None:
        timestamp = str(time.time_ns() // 1_000_000)
        request.headers.update(signer.headers(timestamp, request.method, request.url.path))

    context = ssl.create_default_context(cafile=str(credentials.ca_file))
    async with httpx.AsyncClient(
        base_url=exchange.base_url, verify=context, event_hooks={"request": [sign]}
    ) as client:
        yield client


async def call_and_validate(
    client: httpx.AsyncClient, method: str, path: str, body: bytes | None = None, **kwargs: Any
) -> httpx.Response:
    """Send one request and validate the answer's body against the published schema."""
    headers = {"content-type": "application/json"} if body is not None else {}
    response = await client.request(method, path, content=body, headers=headers, **kwargs)
    validate_response(path, method, response.status_code, response.content)
    return response


async def test_order_answers_are_published_create_order_v2_responses(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A fill, a kill and a resting order each answer 201 with a schema-valid body carrying
    ts_ms (the matching engine's time, Unix ms); a repeat answers the published 409."""
    async with signed_client(fake_exchange, fake_credentials) as client:
        before_ms = time.time_ns() // 1_000_000
        filled = await call_and_validate(client, "POST", ORDER_PATH, order("1" * 32))
        again = await call_and_validate(client, "POST", ORDER_PATH, order("1" * 32))
        resting = await call_and_validate(
            client, "POST", ORDER_PATH, order("2" * 32, time_in_force="good_till_canceled")
        )
        fake_exchange.fill_rule = lambda _order: False
        killed = await call_and_validate(client, "POST", ORDER_PATH, order("3" * 32))
    assert {filled.status_code, resting.status_code, killed.status_code} == {201}
    assert again.status_code == 409
    assert again.json() == {"code": ORDER_EXISTS_CODE, "message": ORDER_EXISTS_MESSAGE}
    assert before_ms <= filled.json()["ts_ms"] <= time.time_ns() // 1_000_000
    assert "average_fill_price" not in killed.json()  # only present when fill_count > 0


async def test_an_order_without_client_order_id_is_accepted(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """client_order_id is optional in the published request: such an order fills, and its
    answer (without a client_order_id) is schema-valid."""
    async with signed_client(fake_exchange, fake_credentials) as client:
        first = await call_and_validate(client, "POST", ORDER_PATH, order(None))
        second = await call_and_validate(client, "POST", ORDER_PATH, order(None))
    assert first.status_code == second.status_code == 201
    assert "client_order_id" not in first.json()
    assert first.json()["order_id"] != second.json()["order_id"]  # no id: two orders
    assert fake_exchange.positions == {"KXTEST-26JAN01-T1": 6.0}


async def test_balance_answers_are_published_balance_responses(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The balance carries cents, the same in fixed-point dollars, the portfolio value and the
    time it last moved, before and after a fill."""
    async with signed_client(fake_exchange, fake_credentials) as client:
        fresh = await call_and_validate(client, "GET", BALANCE_PATH)
        await call_and_validate(client, "POST", ORDER_PATH, order())
        after = await call_and_validate(client, "GET", BALANCE_PATH)
    assert fresh.json()["balance"] == 100_000
    assert fresh.json()["balance_dollars"] == "1000.0000"
    assert fresh.json()["portfolio_value"] == 0
    # 3 x $0.42 plus 3 x $0.02 fee: $1.32 spent, $1.26 of it in the position.
    assert (after.json()["balance"], after.json()["balance_dollars"]) == (99_868, "998.6800")
    assert after.json()["portfolio_value"] == 126
    assert after.json()["updated_ts"] >= fresh.json()["updated_ts"]


async def test_positions_pages_are_published_positions_responses(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Every page (two markets each, a cursor between them) has market and event positions with
    every published field; an event is listed once with its markets added up."""
    async with signed_client(fake_exchange, fake_credentials) as client:
        await call_and_validate(client, "POST", ORDER_PATH, order("1" * 32, ticker="KXA-26-T1"))
        await call_and_validate(
            client, "POST", ORDER_PATH, order("2" * 32, ticker="KXA-26-T2", side="ask")
        )
        await call_and_validate(client, "POST", ORDER_PATH, order("3" * 32, ticker="KXB-26-T1"))
        fake_exchange.positions["KXC-26-T9"] = 1.0  # set by hand: no money figures behind it
        pages = []
        cursor = ""
        while True:
            page = await call_and_validate(
                client, "GET", POSITIONS_PATH, params={"cursor": cursor} if cursor else None
            )
            pages.append(page.json())
            cursor = page.json()["cursor"]
            if not cursor:
                break
    assert [len(page["market_positions"]) for page in pages] == [2, 2]
    events = [event for page in pages for event in page["event_positions"]]
    assert [event["event_ticker"] for event in events] == ["KXA-26", "KXB-26", "KXC-26"]
    assert events[0]["total_cost_shares_fp"] == "6.00"
    # KXA: 3 x $0.42 yes plus 3 x $0.58 no.
    assert events[0]["total_cost_dollars"] == "3.0000"
    markets = {entry["ticker"]: entry for page in pages for entry in page["market_positions"]}
    assert markets["KXA-26-T2"]["position_fp"] == "-3.00"
    assert markets["KXC-26-T9"]["market_exposure_dollars"] == "0.0000"


async def test_error_answers_are_published_error_responses(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A malformed order (400), an account that cannot pay (400), an unsigned request (401),
    injected 409 and 500 answers and a bad cursor (400): each body is the published
    ErrorResponse, code and message at the top level."""
    async with signed_client(fake_exchange, fake_credentials) as client:
        malformed = await call_and_validate(client, "POST", ORDER_PATH, b'{"ticker": "T"}')
        fake_exchange.balance_cents = 1
        broke = await call_and_validate(client, "POST", ORDER_PATH, order())
        fake_exchange.inject(Fault("status", status=409), Fault("status", status=500))
        conflict = await call_and_validate(client, "POST", ORDER_PATH, order())
        failed = await call_and_validate(client, "POST", ORDER_PATH, order())
        cursor = await call_and_validate(client, "GET", POSITIONS_PATH, params={"cursor": "x"})
    context = ssl.create_default_context(cafile=str(fake_credentials.ca_file))
    async with httpx.AsyncClient(base_url=fake_exchange.base_url, verify=context) as bare:
        unsigned = await call_and_validate(bare, "GET", BALANCE_PATH)
    answers = [malformed, broke, conflict, failed, cursor, unsigned]
    assert [answer.status_code for answer in answers] == [400, 400, 409, 500, 400, 401]
    assert [answer.json()["code"] for answer in answers] == [
        "invalid_parameters",
        "insufficient_balance",
        "conflict",
        "internal_server_error",
        "invalid_cursor",
        "unauthorized",
    ]
    assert all(answer.json()["message"] for answer in answers)


async def test_a_429_answers_the_published_example(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """An injected 429 answers {"error": "too many requests"}, the published example (valid
    against ErrorResponse, which declares no required field, only when extra fields are let
    through)."""
    fake_exchange.inject(Fault("status", status=429))
    async with signed_client(fake_exchange, fake_credentials) as client:
        response = await client.post(ORDER_PATH, content=order())
    assert response.status_code == 429
    assert response.json() == {"error": "too many requests"}
    validate_response(ORDER_PATH, "POST", 429, response.content, strict=False)


def test_the_validator_refuses_what_the_fake_used_to_send() -> None:
    """The schema check has teeth: an order answer without ts_ms, a bare balance, a position
    without its money fields and a nested error body each fail it."""
    old_shapes: list[tuple[str, str, int, dict[str, Any]]] = [
        (ORDER_PATH, "POST", 201, {"order_id": "o", "fill_count": "1.00", "remaining_count": "0"}),
        (BALANCE_PATH, "GET", 200, {"balance": 100}),
        (
            POSITIONS_PATH,
            "GET",
            200,
            {"market_positions": [{"ticker": "T", "position_fp": "1.00"}], "cursor": ""},
        ),
        (ORDER_PATH, "POST", 400, {"error": {"code": "x", "message": "y"}}),
    ]
    for path, method, status, body in old_shapes:
        with pytest.raises(pytest.fail.Exception, match="does not match"):
            validate_response(path, method, status, body)


@pytest.mark.parametrize(("path", "method"), sorted(ENDPOINTS))
def test_every_endpoint_the_fake_serves_is_published(path: str, method: str) -> None:
    """Each endpoint the fake serves answers a plain request with a schema-valid body (orders of
    every outcome on the book first, one resting in an order group, and a batch cancel naming an
    order that rests and one that does not; a path's ``{order_id}`` is the resting order's), so a
    new endpoint is checked as soon as it is served."""
    account = FakeAccount()
    _, created = account.answer("POST", f"{ORDER_GROUPS_PATH}/create", "", b'{"contracts_limit":9}')
    group_id = orjson.loads(created)["order_group_id"]
    account.answer("POST", ORDER_PATH, "", order("1" * 32))
    gtc = order("2" * 32, time_in_force="good_till_canceled", order_group_id=group_id)
    _, placed = account.answer("POST", ORDER_PATH, "", gtc)
    account.fill_rule = lambda _order: False
    account.answer("POST", ORDER_PATH, "", order("3" * 32))
    bodies = {
        ("POST", ORDER_PATH): order("4" * 32),
        ("POST", f"{ORDER_GROUPS_PATH}/create"): b'{"contracts_limit":5}',
        ("DELETE", BATCH_CANCEL_PATH): orjson.dumps(
            {"orders": [{"order_id": orjson.loads(placed)["order_id"]}, {"order_id": "gone"}]}
        ),
    }
    body = bodies.get((method, path), b"")
    asked = path.replace("{order_group_id}", group_id)
    asked = asked.replace("{order_id}", account.orders["2" * 32]["order_id"])
    status, payload = account.answer(method, asked, "", body)
    assert 200 <= status < 300, payload
    validate_response(path, method, status, payload)


def test_the_endpoints_added_for_lookups_are_served() -> None:
    """The list of served endpoints includes one order by id and the user data timestamp, so
    the test above validates them (a route dropped from the table fails here, not silently)."""
    assert (ONE_ORDER_PATH, "GET") in ENDPOINTS
    assert (USER_DATA_TIMESTAMP_PATH, "GET") in ENDPOINTS


async def test_one_order_and_the_user_data_timestamp_answer_published_bodies(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Over TLS, signed: one order by id (200 GetOrderResponse, 404 for an unknown id) and the
    user data timestamp (an RFC 3339 ``as_of_time``) validate against the published files."""
    async with signed_client(fake_exchange, fake_credentials) as client:
        placed = await call_and_validate(client, "POST", ORDER_PATH, order("5" * 32))
        one_path = ONE_ORDER_PATH.replace("{order_id}", placed.json()["order_id"])
        found = await client.get(one_path)
        missing = await client.get(ONE_ORDER_PATH.replace("{order_id}", "no-such-order"))
        stamp = await call_and_validate(client, "GET", USER_DATA_TIMESTAMP_PATH)
    for answer in (found, missing):
        validate_response(ONE_ORDER_PATH, "GET", answer.status_code, answer.content)
    assert (found.status_code, missing.status_code) == (200, 404)
    assert found.json()["order"]["client_order_id"] == "5" * 32
    assert missing.json()["code"] == "not_found"
    assert stamp.status_code == 200 and set(stamp.json()) == {"as_of_time"}


def test_the_validator_refuses_a_timestamp_that_is_not_a_date_time() -> None:
    """The date-time format is checked: an epoch number or a bare date as ``as_of_time`` fails
    (so the fake's ISO stamp above is validated, not waved through)."""
    for bad in ({"as_of_time": 1_700_000_000}, {"as_of_time": "yesterday"}, {}):
        with pytest.raises(pytest.fail.Exception, match="does not match"):
            validate_response(USER_DATA_TIMESTAMP_PATH, "GET", 200, bad)
