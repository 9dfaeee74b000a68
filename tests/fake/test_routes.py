"""The fake's route table and its book events: endpoints as data, every book change announced."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pytest

from executor.fake.book.account import ORDER_PATH, BookEvent, FakeAccount
from executor.fake.routes import ErrorReply, Route, RouteTable

TABLE = RouteTable(
    [
        Route("GET", "/v2/orders", "list"),
        Route("GET", "/v2/orders/{order_id}", "one"),
        Route("DELETE", "/v2/orders/{order_id}", "cancel"),
    ]
)


def test_a_template_segment_is_a_parameter() -> None:
    """``{order_id}`` matches one segment and hands it over by name."""
    route, params = TABLE.find("DELETE", "/v2/orders/abc123")
    assert (route.handler, params) == ("cancel", {"order_id": "abc123"})


def test_a_template_does_not_match_other_shapes() -> None:
    """An empty, missing or extra segment is not the templated path (its negative twin)."""
    for path in ("/v2/orders/", "/v2/orders/abc/fills", "/v2/order/abc"):
        assert Route("GET", "/v2/orders/{order_id}", "one").match(path) is None


def test_an_unknown_path_is_404_and_a_wrong_method_405() -> None:
    """No route with the path answers 404; routes with it under other methods answer 405."""
    with pytest.raises(ErrorReply) as missing:
        TABLE.find("GET", "/v2/nothing")
    assert missing.value.status == 404
    with pytest.raises(ErrorReply) as wrong:
        TABLE.find("PUT", "/v2/orders/abc")
    assert (wrong.value.status, wrong.value.message) == (405, "/v2/orders/abc takes GET, DELETE")


def _order(client_order_id: str, time_in_force: str) -> bytes:
    return orjson.dumps(
        {
            "ticker": "KXTEST-26JAN01-T1",
            "client_order_id": client_order_id,
            "side": "bid",
            "count": "3.00",
            "price": "0.4200",
            "time_in_force": time_in_force,
            "self_trade_prevention_type": "taker_at_cross",
        }
    )


def test_every_book_change_is_announced_to_the_watchers() -> None:
    """A placement, a later fill and a cancel each reach every watcher, in order."""
    account = FakeAccount()
    seen: list[BookEvent] = []
    account.watchers.append(seen.append)
    account.answer("POST", ORDER_PATH, "", _order("a" * 32, "fill_or_kill"))
    account.answer("POST", ORDER_PATH, "", _order("b" * 32, "good_till_canceled"))
    account.fill_resting("b" * 32, "1")
    account.cancel_resting("b" * 32)
    assert [(event.kind, event.order.client_order_id, event.contracts) for event in seen] == [
        ("placed", "a" * 32, Decimal(3)),
        ("placed", "b" * 32, Decimal(0)),
        ("fill", "b" * 32, Decimal(1)),
        ("canceled", "b" * 32, Decimal(2)),
    ]


def test_a_repeated_client_order_id_is_not_a_new_placement() -> None:
    """The same client_order_id again answers 409 and announces nothing new."""
    account = FakeAccount()
    seen: list[BookEvent] = []
    account.watchers.append(seen.append)
    statuses = [
        account.answer("POST", ORDER_PATH, "", _order("a" * 32, "fill_or_kill"))[0]
        for _ in range(2)
    ]
    assert statuses == [201, 409]
    assert len(seen) == 1
