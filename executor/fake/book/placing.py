"""Placing an order on the fake: the request checked, the fill priced, the book's record made.

Pure functions over the order JSON the client sent (``parse_order``: enough of the published
``CreateOrderV2Request`` checked that placing cannot fail on a type), what a fill costs
(``fee_per_contract``: Kalshi's taker fee, rounded up to the cent) and the order book's record of
an order just answered (``book_entry``). The account (``executor.fake.book.account``) decides
whether an order fills, kills or rests and keeps the money; no I/O here.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import orjson

from executor.fake.book.orders import BookOrder, BookStatus
from executor.fake.routes import ErrorReply

FEE_RATE: Final = Decimal("0.07")
"""Kalshi's taker fee coefficient: fee per contract = ceil_cent(0.07 * p * (1 - p))."""

ORDER_RESPONSE_FIELDS: Final = (
    "order_id",
    "client_order_id",
    "fill_count",
    "remaining_count",
    "average_fill_price",
    "average_fee_paid",
    "ts_ms",
)
"""The published ``CreateOrderV2Response`` properties, the only ones an order answer carries."""
ORDER_REQUIRED_FIELDS: Final = (
    "ticker",
    "side",
    "count",
    "price",
    "time_in_force",
    "self_trade_prevention_type",
)
"""The published ``CreateOrderV2Request``'s required properties (``client_order_id`` is not)."""
TIME_IN_FORCE_VALUES: Final = frozenset(
    {"fill_or_kill", "good_till_canceled", "immediate_or_cancel"}
)
SELF_TRADE_PREVENTION_VALUES: Final = frozenset({"taker_at_cross", "maker"})


def fee_per_contract(price: Decimal) -> Decimal:
    """The taker fee of one contract at ``price`` (dollars), rounded up to the cent."""
    return Decimal(math.ceil(FEE_RATE * price * (1 - price) * 100)) / 100


def parse_order(body: bytes) -> dict[str, Any]:
    """The order JSON, checked against the published request enough that placing it cannot fail
    on a type: the required fields, their enums, and ``client_order_id`` (optional) a string.

    Raises:
        ErrorReply: 400 for a body that is not an order.
    """
    try:
        order = orjson.loads(body)
        fields = {key: order[key] for key in ORDER_REQUIRED_FIELDS if key not in ("count", "price")}
        count, price = Decimal(order["count"]), Decimal(order["price"])
        in_range = count.is_finite() and price.is_finite() and count > 0 and 0 < price < 1
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, InvalidOperation):
        raise ErrorReply(400, "invalid_parameters", "malformed order body") from None
    if "client_order_id" in order:
        fields["client_order_id"] = order["client_order_id"]
    if not all(isinstance(value, str) for value in fields.values()):
        raise ErrorReply(400, "invalid_parameters", "ticker, ids and enums must be strings")
    if fields["side"] not in {"bid", "ask"}:
        raise ErrorReply(400, "invalid_parameters", f"side {fields['side']!r} is not bid or ask")
    if fields["time_in_force"] not in TIME_IN_FORCE_VALUES:
        raise ErrorReply(400, "invalid_parameters", f"time_in_force {fields['time_in_force']!r}")
    if fields["self_trade_prevention_type"] not in SELF_TRADE_PREVENTION_VALUES:
        stp = fields["self_trade_prevention_type"]
        raise ErrorReply(400, "invalid_parameters", f"self_trade_prevention_type {stp!r}")
    if not in_range:
        raise ErrorReply(400, "invalid_parameters", "count must be > 0 and 0 < price < 1")
    index = order.get("exchange_index", 0)
    if not isinstance(index, int) or isinstance(index, bool):
        raise ErrorReply(400, "invalid_parameters", f"exchange_index {index!r} is not an integer")
    if not isinstance(order.get("order_group_id", ""), str):
        raise ErrorReply(400, "invalid_parameters", "order_group_id must be a string")
    if not isinstance(order.get("cancel_order_on_pause", False), bool):
        raise ErrorReply(400, "invalid_parameters", "cancel_order_on_pause must be a boolean")
    return dict(order)


def book_entry(order: dict[str, Any], response: dict[str, Any], now_ms: int) -> BookOrder:
    """The order book's record of an order placed at ``now_ms``, from its request and response.

    Only the published order-response fields are read (``order_id``, ``fill_count``,
    ``average_fee_paid``); the status follows from them and the time in force.
    """
    price, filled = Decimal(order["price"]), Decimal(response["fill_count"])
    paid = price if order["side"] == "bid" else 1 - price
    fee = Decimal(response.get("average_fee_paid") or 0)
    index = order.get("exchange_index")
    status: BookStatus = "executed" if filled > 0 else "canceled"
    if order["time_in_force"] == "good_till_canceled" and filled < Decimal(order["count"]):
        status = "resting"
    return BookOrder(
        order_id=response["order_id"],
        client_order_id=str(order.get("client_order_id") or ""),
        ticker=order["ticker"],
        book_side=order["side"],
        yes_price=price,
        initial=Decimal(order["count"]),
        filled=filled,
        status=status,
        taker_cost=filled * paid,
        maker_cost=Decimal(0),
        taker_fees=filled * fee,
        maker_fees=Decimal(0),
        created_ms=now_ms,
        updated_ms=now_ms,
        self_trade_prevention_type=str(order.get("self_trade_prevention_type", "")),
        exchange_index=index if isinstance(index, int) and index >= 0 else 0,
        order_group_id=order.get("order_group_id"),
        cancel_order_on_pause=bool(order.get("cancel_order_on_pause", False)),
    )


__all__ = [
    "FEE_RATE",
    "ORDER_REQUIRED_FIELDS",
    "ORDER_RESPONSE_FIELDS",
    "SELF_TRADE_PREVENTION_VALUES",
    "TIME_IN_FORCE_VALUES",
    "book_entry",
    "fee_per_contract",
    "parse_order",
]
