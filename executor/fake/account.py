"""The fake exchange's account and order book, without I/O (DISPATCH.md §9).

What the exchange decides for a request once it is authenticated: place an order (fill, kill or
rest, idempotent on ``client_order_id``), read the balance, page through positions and orders
(``executor.fake.orders``), and fill or cancel a resting order later. The HTTPS
server in ``executor.fake.exchange`` inherits this and adds TLS, HTTP and signature checks.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import orjson

from executor.clock import wall_ms
from executor.fake.orders import (
    BadOrdersQuery,
    BookOrder,
    BookStatus,
    orders_page,
    parse_orders_query,
)

ORDER_PATH: Final = "/trade-api/v2/portfolio/events/orders"
BALANCE_PATH: Final = "/trade-api/v2/portfolio/balance"
POSITIONS_PATH: Final = "/trade-api/v2/portfolio/positions"
ORDERS_PATH: Final = "/trade-api/v2/portfolio/orders"
# Written out rather than imported from executor.exchange.transport: the fake checks the transport,
# so it must not share its constants (a test asserts the two agree).

DEFAULT_BALANCE_CENTS: Final = 100_000
"""The account's starting balance in cents: $1,000 (DISPATCH.md §9)."""
POSITIONS_PAGE_SIZE: Final = 2
"""Positions per page: small, so every client that reads a few positions follows a cursor."""
FEE_RATE: Final = Decimal("0.07")
"""Kalshi's taker fee coefficient: fee per contract = ceil_cent(0.07 * p * (1 - p))."""


def always_fill(order: dict[str, Any]) -> bool:
    """The default fill rule: every fill_or_kill and immediate_or_cancel order fills in full."""
    return True


def never_fill(order: dict[str, Any]) -> bool:
    """A fill rule that kills every fill_or_kill and immediate_or_cancel order."""
    return False


class ErrorReply(Exception):
    """Answer the current request with ``status`` and a Kalshi ``{"error": ...}`` body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class FakeAccount:
    """One account: a balance, positions and orders, answering the three endpoints.

    Attributes:
        balance_cents: the balance (settable), debited by fills and their fees.
        positions: signed contracts per ticker (YES positive), built from fills (settable).
        orders: the response of every placed order, by ``client_order_id``.
        book: every placed order as ``GET /portfolio/orders`` shows it, by ``client_order_id``.
        fill_rule: order JSON -> fill (True) or kill (False) for fill_or_kill / IOC orders.
    """

    def __init__(
        self,
        *,
        balance_cents: int = DEFAULT_BALANCE_CENTS,
        fill_rule: Callable[[dict[str, Any]], bool] = always_fill,
    ) -> None:
        self.balance_cents = balance_cents
        self.positions: dict[str, float] = {}
        self.orders: dict[str, dict[str, Any]] = {}
        self.book: dict[str, BookOrder] = {}
        self.fill_rule = fill_rule

    def answer(self, method: str, path: str, query: str, body: bytes) -> tuple[int, bytes]:
        """(status, JSON body) for one authenticated request."""
        allowed = {
            ORDER_PATH: "POST",
            BALANCE_PATH: "GET",
            POSITIONS_PATH: "GET",
            ORDERS_PATH: "GET",
        }
        payload: dict[str, Any]
        try:
            if path not in allowed:
                raise ErrorReply(404, "not_found", f"no endpoint {path}")
            if method != allowed[path]:
                raise ErrorReply(405, "method_not_allowed", f"{path} takes {allowed[path]}")
            if path == ORDER_PATH:
                payload = self.place_order(body)
            elif path == BALANCE_PATH:
                payload = {"balance": self.balance_cents}
            elif path == ORDERS_PATH:
                payload = self.orders_list_page(query)
            else:
                payload = self.positions_page(query)
        except ErrorReply as reply:
            return reply.status, error_body(reply.code, reply.message)
        return (201 if path == ORDER_PATH else 200), orjson.dumps(payload)

    def place_order(self, body: bytes) -> dict[str, Any]:
        """Place (or find again) the order in ``body``; its response object."""
        order = parse_order(body)
        client_order_id = order["client_order_id"]
        if client_order_id in self.orders:
            return self.orders[client_order_id]  # idempotent: the same order again
        count, price = Decimal(order["count"]), Decimal(order["price"])
        count_text = f"{count:.2f}"
        response: dict[str, Any] = {
            "order_id": uuid.uuid4().hex,
            "client_order_id": client_order_id,
            "ticker": order["ticker"],
            "side": order["side"],
        }
        if order["time_in_force"] == "good_till_canceled" or not self.fill_rule(order):
            resting = order["time_in_force"] == "good_till_canceled"
            response.update(
                status="resting" if resting else "canceled",
                fill_count="0.00",
                remaining_count=count_text,
            )
        else:
            fee_dollars = Decimal(math.ceil(FEE_RATE * price * (1 - price) * 100)) / 100
            cost = count * (price if order["side"] == "bid" else 1 - price) + count * fee_dollars
            cost_cents = math.ceil(cost * 100)
            if cost_cents > self.balance_cents:
                raise ErrorReply(400, "insufficient_balance", f"order costs {cost_cents} cents")
            self.balance_cents -= cost_cents
            signed = float(count) if order["side"] == "bid" else -float(count)
            self.positions[order["ticker"]] = self.positions.get(order["ticker"], 0.0) + signed
            response.update(
                status="executed",
                fill_count=count_text,
                remaining_count="0.00",
                average_fill_price=order["price"],
                average_fee_paid=f"{fee_dollars:.4f}",
            )
        self.orders[client_order_id] = response
        self.book[client_order_id] = self._book_entry(order, response)
        return response

    def _book_entry(self, order: dict[str, Any], response: dict[str, Any]) -> BookOrder:
        """The order book's record of an order just placed, from its request and response.

        Only the published order-response fields are read (``order_id``, ``fill_count``,
        ``average_fee_paid``); the status follows from them and the time in force.
        """
        now_ms = wall_ms()
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
        )

    def orders_list_page(self, query: str) -> dict[str, Any]:
        """One page of ``GET /portfolio/orders`` (filters in ``query``; 400 for a bad one)."""
        try:
            return orders_page(self.book, parse_orders_query(query))
        except BadOrdersQuery as error:
            raise ErrorReply(400, "invalid_parameters", str(error)) from None

    def fill_resting(self, client_order_id: str, contracts: str | None = None) -> BookOrder:
        """Fill a resting order as a maker (all that remains, or ``contracts`` of it).

        The account moves as for any fill, without a fee (makers pay none here); the order is
        ``executed`` once nothing remains.

        Raises:
            KeyError: no such order. ValueError: it is not resting, or too many contracts.
        """
        entry = self.book[client_order_id]
        if entry.status != "resting":
            raise ValueError(f"order {client_order_id} is {entry.status}, not resting")
        amount = entry.remaining if contracts is None else Decimal(contracts)
        if not 0 < amount <= entry.remaining:
            raise ValueError(f"cannot fill {amount} of {entry.remaining} remaining")
        self.balance_cents -= math.ceil(amount * entry.price_paid() * 100)
        signed = float(amount) if entry.book_side == "bid" else -float(amount)
        self.positions[entry.ticker] = self.positions.get(entry.ticker, 0.0) + signed
        entry.filled += amount
        entry.maker_cost += amount * entry.price_paid()
        if entry.filled == entry.initial:
            entry.status = "executed"
        entry.updated_ms = wall_ms()
        return entry

    def cancel_resting(self, client_order_id: str) -> BookOrder:
        """Cancel a resting order (what has filled stays filled).

        Raises:
            KeyError: no such order. ValueError: it is not resting.
        """
        entry = self.book[client_order_id]
        if entry.status != "resting":
            raise ValueError(f"order {client_order_id} is {entry.status}, not resting")
        entry.status = "canceled"
        entry.updated_ms = wall_ms()
        return entry

    def positions_page(self, query: str) -> dict[str, Any]:
        """One page of positions, from the ``cursor`` in ``query`` (an offset; "" ends)."""
        cursor = dict(part.partition("=")[::2] for part in query.split("&") if part).get("cursor")
        start = 0
        if cursor:
            if not cursor.isdigit():
                raise ErrorReply(400, "invalid_cursor", f"bad cursor {cursor!r}")
            start = int(cursor)
        tickers = sorted(self.positions)
        page = tickers[start : start + POSITIONS_PAGE_SIZE]
        following = start + POSITIONS_PAGE_SIZE
        return {
            "market_positions": [
                {"ticker": ticker, "position_fp": f"{self.positions[ticker]:.2f}"}
                for ticker in page
            ],
            "cursor": str(following) if following < len(tickers) else "",
        }


def parse_order(body: bytes) -> dict[str, Any]:
    """The order JSON, checked enough that placing it cannot fail on a type.

    Raises:
        ErrorReply: 400 for a body that is not an order.
    """
    try:
        order = orjson.loads(body)
        fields = {key: order[key] for key in ("ticker", "client_order_id", "side", "time_in_force")}
        count, price = Decimal(order["count"]), Decimal(order["price"])
        in_range = count.is_finite() and price.is_finite() and count > 0 and 0 < price < 1
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, InvalidOperation):
        raise ErrorReply(400, "invalid_parameters", "malformed order body") from None
    if not all(isinstance(value, str) for value in fields.values()):
        raise ErrorReply(400, "invalid_parameters", "ticker, ids and enums must be strings")
    if fields["side"] not in {"bid", "ask"}:
        raise ErrorReply(400, "invalid_parameters", f"side {fields['side']!r} is not bid or ask")
    if not in_range:
        raise ErrorReply(400, "invalid_parameters", "count must be > 0 and 0 < price < 1")
    return dict(order)


def error_body(code: str, message: str) -> bytes:
    """A Kalshi error body."""
    return orjson.dumps({"error": {"code": code, "message": message}})
