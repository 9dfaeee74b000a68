"""The fake's order groups, batch cancels, pauses and rate-limit answers (no I/O: the account).

Each answer is also validated against the published OpenAPI file of its endpoint.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from executor.fake.book.account import (
    BATCH_CANCEL_PATH,
    ENDPOINT_COSTS_PATH,
    LIMITS_PATH,
    ORDER_GROUPS_PATH,
    ORDER_PATH,
    BookEvent,
    FakeAccount,
    GroupEvent,
)
from executor.fake.exchange import FakeCredentials, FakeExchange
from tests.fake.test_fake_stream import receive, session, subscribe
from tests.support.openapi import validate_response

TICKER = "KXGROUP-26JAN01-T1"


def order(client_order_id: str, **overrides: Any) -> bytes:
    """A resting (good_till_canceled) three-contract order body."""
    fields: dict[str, Any] = {
        "ticker": TICKER,
        "client_order_id": client_order_id,
        "side": "bid",
        "count": "3.00",
        "price": "0.4200",
        "time_in_force": "good_till_canceled",
        "self_trade_prevention_type": "taker_at_cross",
        "exchange_index": 0,
    }
    fields.update(overrides)
    return orjson.dumps(fields)


def call(
    account: FakeAccount, method: str, path: str, body: bytes = b"", group: str | None = None
) -> tuple[int, Any]:
    """One request, its answer validated against the published schema of its endpoint (``group``
    names the id that stands for ``{order_group_id}`` in the path; by default every known one)."""
    status, payload = account.answer(method, path, "", body)
    template = path
    for group_id in [group] if group else account.order_groups.groups:
        template = template.replace(group_id, "{order_group_id}")
    validate_response(template, method, status, payload)
    return status, orjson.loads(payload)


def new_group(account: FakeAccount, limit: int = 100) -> str:
    """A fresh group's id."""
    status, answer = call(
        account, "POST", f"{ORDER_GROUPS_PATH}/create", orjson.dumps({"contracts_limit": limit})
    )
    assert status == 201
    return str(answer["order_group_id"])


def test_a_triggered_group_cancels_its_resting_orders_and_refuses_new_ones() -> None:
    """Trigger: the group's two resting orders are cancelled, an order outside it rests on, a
    new order in it is refused (400 order_group_triggered); after a reset it is accepted."""
    account = FakeAccount()
    group = new_group(account)
    for name in ("a", "b"):
        assert call(account, "POST", ORDER_PATH, order(name * 32, order_group_id=group))[0] == 201
    assert call(account, "POST", ORDER_PATH, order("c" * 32))[0] == 201
    status, _ = call(account, "PUT", f"{ORDER_GROUPS_PATH}/{group}/trigger", b"{}")
    assert status == 200
    assert {key[0]: entry.status for key, entry in account.book.items()} == {
        "a": "canceled",
        "b": "canceled",
        "c": "resting",
    }
    refused, error = call(account, "POST", ORDER_PATH, order("d" * 32, order_group_id=group))
    assert (refused, error["code"]) == (400, "order_group_triggered")
    assert "d" * 32 not in account.book
    assert call(account, "PUT", f"{ORDER_GROUPS_PATH}/{group}/reset", b"{}")[0] == 200
    assert call(account, "POST", ORDER_PATH, order("d" * 32, order_group_id=group))[0] == 201
    _, described = call(account, "GET", f"{ORDER_GROUPS_PATH}/{group}")
    assert len(described["orders"]) == 3 and described["contracts_limit_fp"] == "100.00"


def test_an_unknown_group_is_refused() -> None:
    """An order naming a group that does not exist is refused, and a trigger of one is a 404."""
    account = FakeAccount()
    status, error = call(account, "POST", ORDER_PATH, order("a" * 32, order_group_id="nope"))
    assert (status, error["code"]) == (400, "order_group_not_found")
    assert call(account, "PUT", f"{ORDER_GROUPS_PATH}/nope/trigger", b"{}", "nope")[0] == 404


def test_more_contracts_matched_than_the_limit_triggers_the_group() -> None:
    """A limit of 4: a fill of 3 leaves the group active, a second fill of 3 within 15 s
    triggers it and cancels what still rests in it."""
    account = FakeAccount()
    group = new_group(account, limit=4)
    for name in ("a", "b", "c"):
        call(account, "POST", ORDER_PATH, order(name * 32, order_group_id=group))
    account.fill_resting("a" * 32)
    assert not account.order_groups.groups[group].triggered
    account.fill_resting("b" * 32)
    assert account.order_groups.groups[group].triggered
    assert account.book["c" * 32].status == "canceled"
    assert account.book["a" * 32].status == account.book["b" * 32].status == "executed"


def test_batch_cancel_answers_each_order_in_the_v2_shape() -> None:
    """A batch naming a resting order, a filled one and an unknown id: the first is cancelled
    (reduced_by its remainder, ts_ms), the others answer reduced_by 0 with an error."""
    account = FakeAccount()
    _, resting = call(account, "POST", ORDER_PATH, order("a" * 32))
    _, filled = call(account, "POST", ORDER_PATH, order("b" * 32, time_in_force="fill_or_kill"))
    body = orjson.dumps(
        {"orders": [{"order_id": oid} for oid in (resting["order_id"], filled["order_id"], "x")]}
    )
    status, answer = call(account, "DELETE", BATCH_CANCEL_PATH, body)
    assert status == 200
    first, second, third = answer["orders"]
    assert (first["reduced_by"], first["client_order_id"], first.get("error")) == (
        "3.00",
        "a" * 32,
        None,
    )
    assert isinstance(first["ts_ms"], int)
    assert (second["reduced_by"], second["error"]["code"]) == ("0.00", "order_not_resting")
    assert (third["reduced_by"], third["error"]["code"]) == ("0.00", "not_found")
    assert account.book["a" * 32].status == "canceled"
    malformed = account.answer("DELETE", BATCH_CANCEL_PATH, "", b'{"orders": [{"id": 1}]}')
    assert malformed[0] == 400


def test_a_pause_cancels_only_orders_placed_with_cancel_order_on_pause() -> None:
    """cancel_order_on_pause true: cancelled when trading pauses; false or absent: rests on."""
    account = FakeAccount()
    call(account, "POST", ORDER_PATH, order("a" * 32, cancel_order_on_pause=True))
    call(account, "POST", ORDER_PATH, order("b" * 32, cancel_order_on_pause=False))
    call(account, "POST", ORDER_PATH, order("c" * 32))
    cancelled = account.pause_trading()
    assert [entry.client_order_id for entry in cancelled] == ["a" * 32]
    assert account.book["b" * 32].status == account.book["c" * 32].status == "resting"


def test_group_and_book_changes_are_announced() -> None:
    """Watchers see created, triggered, reset (the limit on created only), and the book's
    watchers see the trigger's cancel."""
    account = FakeAccount()
    groups: list[GroupEvent] = []
    book: list[BookEvent] = []
    account.group_watchers.append(groups.append)
    account.watchers.append(book.append)
    group = new_group(account, limit=7)
    call(account, "POST", ORDER_PATH, order("a" * 32, order_group_id=group))
    call(account, "PUT", f"{ORDER_GROUPS_PATH}/{group}/trigger", b"{}")
    call(account, "PUT", f"{ORDER_GROUPS_PATH}/{group}/reset", b"{}")
    assert [(event.kind, event.contracts_limit_fp) for event in groups] == [
        ("created", "7.00"),
        ("triggered", None),
        ("reset", None),
    ]
    assert {event.order_group_id for event in groups} == {group}
    assert [(event.kind, event.contracts) for event in book] == [
        ("placed", Decimal("0.00")),
        ("canceled", Decimal("3.00")),
    ]


def test_the_account_limits_are_settable_and_published() -> None:
    """The Basic tier by default; set to 2 writes a second, the answer says 20 tokens a
    second; the costs list the batch cancel at 2 a order."""
    account = FakeAccount()
    _, basic = call(account, "GET", LIMITS_PATH)
    assert (basic["read"]["refill_rate"], basic["write"]["bucket_capacity"]) == (200, 100)
    account.api_limits.write_refill = account.api_limits.write_capacity = 20
    _, limited = call(account, "GET", LIMITS_PATH)
    assert limited["write"] == {"refill_rate": 20, "bucket_capacity": 20}
    _, costs = call(account, "GET", ENDPOINT_COSTS_PATH)
    assert costs == {
        "default_cost": 10,
        "endpoint_costs": [
            {"method": "DELETE", "path": "/portfolio/events/orders/batched", "cost": 2}
        ],
    }


async def test_group_changes_made_over_rest_go_out_on_the_stream(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Created, triggered and reset through the REST endpoints reach a subscriber of
    order_group_updates, in order, each message validated against the published AsyncAPI."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "order_group_updates")
        group = new_group(fake_exchange, limit=3)
        call(fake_exchange, "PUT", f"{ORDER_GROUPS_PATH}/{group}/trigger", b"{}")
        call(fake_exchange, "PUT", f"{ORDER_GROUPS_PATH}/{group}/reset", b"{}")
        events = [(await receive(ws))["msg"] for _ in range(3)]
    assert [(event["event_type"], event["order_group_id"]) for event in events] == [
        ("created", group),
        ("triggered", group),
        ("reset", group),
    ]
    assert events[0]["contracts_limit_fp"] == "3.00"
