"""The fake exchange's account and order book, without I/O (DISPATCH.md §9).

What the exchange decides for a request once it is authenticated: place an order (fill, kill or
rest, idempotent on ``client_order_id``), read the balance, page through positions and orders
(``executor.fake.orders``), and fill or cancel a resting order later. The HTTPS
server in ``executor.fake.exchange`` inherits this and adds TLS, HTTP and signature checks.

Every body it answers has the shape of Kalshi's published OpenAPI (vendored in
``tests/published/kalshi-openapi/``; a test validates each against it): the order response
carries only the ``CreateOrderV2Response`` fields (``ts_ms`` included; what the exchange knows
beyond them is kept in ``book``), the balance and the positions every required field, and an
error the ``ErrorResponse`` shape, ``code`` and ``message`` at the top level (a 429 the published
``{"error": "too many requests"}``).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
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
ENDPOINTS: Final = {
    ORDER_PATH: "POST",
    BALANCE_PATH: "GET",
    POSITIONS_PATH: "GET",
    ORDERS_PATH: "GET",
}
"""Every endpoint the fake serves and its method (a test validates each answer against the
published API)."""

DEFAULT_BALANCE_CENTS: Final = 100_000
"""The account's starting balance in cents: $1,000 (DISPATCH.md §9)."""
POSITIONS_PAGE_SIZE: Final = 2
"""Positions per page: small, so every client that reads a few positions follows a cursor."""
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
TOO_MANY_REQUESTS_BODY: Final = b'{"error":"too many requests"}'
"""The body of the published 429 example (not in the ``ErrorResponse`` shape)."""



def always_fill(order: dict[str, Any]) -> bool:
    """The default fill rule: every fill_or_kill and immediate_or_cancel order fills in full."""
    return True


def never_fill(order: dict[str, Any]) -> bool:
    """A fill rule that kills every fill_or_kill and immediate_or_cancel order."""
    return False


class ErrorReply(Exception):
    """Answer the current request with ``status`` and a published ``ErrorResponse`` body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class MarketBook:
    """What the account has done in one market, for the published ``MarketPosition`` fields."""

    exchange_index: int = 0
    traded_cents: int = 0
    exposure_cents: int = 0
    fees_cents: int = 0
    updated_s: float = 0.0


class FakeAccount:
    """One account: a balance, positions and orders, answering the three endpoints.

    Attributes:
        balance_cents: the balance (settable), debited by fills and their fees.
        positions: signed contracts per ticker (YES positive), built from fills (settable).
        orders: the response of every placed order, by ``client_order_id`` (by ``order_id`` for
            an order sent without one).
        book: every placed order as ``GET /portfolio/orders`` shows it, keyed as ``orders``.
        markets: per ticker, what the positions' money fields are built from.
        fill_rule: order JSON -> fill (True) or kill (False) for fill_or_kill / IOC orders.
    """

    def __init__(
        self,
        *,
        balance_cents: int = DEFAULT_BALANCE_CENTS,
        fill_rule: Callable[[dict[str, Any]], bool] = always_fill,
    ) -> None:
        self.balance_cents = balance_cents
        self.balance_updated_s = time.time()
        self.positions: dict[str, float] = {}
        self.orders: dict[str, dict[str, Any]] = {}
        self.book: dict[str, BookOrder] = {}
        self.markets: dict[str, MarketBook] = {}
        self.fill_rule = fill_rule

    def answer(self, method: str, path: str, query: str, body: bytes) -> tuple[int, bytes]:
        """(status, JSON body) for one authenticated request."""
        payload: dict[str, Any]
        try:
            if path not in ENDPOINTS:
                raise ErrorReply(404, "not_found", f"no endpoint {path}")
            if method != ENDPOINTS[path]:
                raise ErrorReply(405, "method_not_allowed", f"{path} takes {ENDPOINTS[path]}")
            if path == ORDER_PATH:
                payload = self.place_order(body)
            elif path == BALANCE_PATH:
                payload = self.balance()
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
        client_order_id = order.get("client_order_id")
        if client_order_id is not None and client_order_id in self.orders:
            return self.orders[client_order_id]  # idempotent: the same order again
        count, price = Decimal(order["count"]), Decimal(order["price"])
        count_text = f"{count:.2f}"
        response: dict[str, Any] = {"order_id": uuid.uuid4().hex}
        if client_order_id is not None:
            response["client_order_id"] = client_order_id
        if order["time_in_force"] == "good_till_canceled" or not self.fill_rule(order):
            response.update(fill_count="0.00", remaining_count=count_text)
        else:
            fee_dollars = Decimal(math.ceil(FEE_RATE * price * (1 - price) * 100)) / 100
            notional = count * (price if order["side"] == "bid" else 1 - price)
            cost_cents = math.ceil((notional + count * fee_dollars) * 100)
            if cost_cents > self.balance_cents:
                raise ErrorReply(400, "insufficient_balance", f"order costs {cost_cents} cents")
            self.balance_cents -= cost_cents
            signed = float(count) if order["side"] == "bid" else -float(count)
            self.positions[order["ticker"]] = self.positions.get(order["ticker"], 0.0) + signed
            self._book_fill(
                order["ticker"],
                max(order.get("exchange_index", 0), 0),  # -1: routed by ticker
                math.ceil(notional * 100),
                math.ceil(count * fee_dollars * 100),
            )
            response.update(
                fill_count=count_text,
                remaining_count="0.00",
                average_fill_price=order["price"],
                average_fee_paid=f"{fee_dollars:.4f}",
            )
        response["ts_ms"] = int(time.time() * 1000)
        key = client_order_id if client_order_id is not None else response["order_id"]
        self.orders[key] = response
        self.book[key] = self._book_entry(order, response)
        return response

    def _book_fill(
        self, ticker: str, exchange_index: int, notional_cents: int, fee_cents: int
    ) -> None:
        """Add one fill's money to its market's position figures (and move the balance's time)."""
        market = self.markets.setdefault(ticker, MarketBook())
        market.exchange_index = exchange_index
        market.traded_cents += notional_cents
        market.exposure_cents += notional_cents
        market.fees_cents += fee_cents
        market.updated_s = self.balance_updated_s = time.time()

    def balance(self) -> dict[str, Any]:
        """The published ``GetBalanceResponse``: cents, the same as dollars, the portfolio value
        (the cost of the open positions) and when the balance last moved (Unix seconds)."""
        return {
            "balance": self.balance_cents,
            "balance_dollars": _dollars(self.balance_cents),
            "portfolio_value": sum(market.exposure_cents for market in self.markets.values()),
            "updated_ts": int(self.balance_updated_s),
        }

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
        cost_cents = math.ceil(amount * entry.price_paid() * 100)
        self.balance_cents -= cost_cents
        self._book_fill(entry.ticker, entry.exchange_index, cost_cents, 0)
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
        # An event is listed once, on the page of its first market (tickers sort by event).
        listed = {event_ticker(ticker) for ticker in tickers[:start]}
        events = [event for event in dict.fromkeys(map(event_ticker, page)) if event not in listed]
        return {
            "market_positions": [self._market_position(ticker) for ticker in page],
            "event_positions": [self._event_position(event, tickers) for event in events],
            "cursor": str(following) if following < len(tickers) else "",
        }

    def _market_position(self, ticker: str) -> dict[str, Any]:
        """The published ``MarketPosition`` of one ticker (a position set by hand has no money)."""
        market = self.markets.get(ticker, MarketBook())
        return {
            "ticker": ticker,
            "exchange_index": market.exchange_index,
            "total_traded_dollars": _dollars(market.traded_cents),
            "position_fp": f"{self.positions[ticker]:.2f}",
            "market_exposure_dollars": _dollars(market.exposure_cents),
            "realized_pnl_dollars": _dollars(0),
            "fees_paid_dollars": _dollars(market.fees_cents),
            "last_updated_ts": datetime.fromtimestamp(market.updated_s, UTC).isoformat(),
        }

    def _event_position(self, event: str, tickers: list[str]) -> dict[str, Any]:
        """The published ``EventPosition`` of ``event``: its markets' figures added up."""
        members = [ticker for ticker in tickers if event_ticker(ticker) == event]
        markets = [self.markets.get(ticker, MarketBook()) for ticker in members]
        shares = sum(abs(self.positions[ticker]) for ticker in members)
        return {
            "event_ticker": event,
            "total_cost_dollars": _dollars(sum(market.traded_cents for market in markets)),
            "total_cost_shares_fp": f"{shares:.2f}",
            "event_exposure_dollars": _dollars(sum(market.exposure_cents for market in markets)),
            "realized_pnl_dollars": _dollars(0),
            "fees_paid_dollars": _dollars(sum(market.fees_cents for market in markets)),
        }


def event_ticker(market_ticker: str) -> str:
    """The event a market belongs to: its ticker up to the last ``-`` (``KX-26JAN01-T1``'s is
    ``KX-26JAN01``); a ticker with no ``-`` is its own event."""
    return market_ticker.rpartition("-")[0] or market_ticker


def _dollars(cents: int) -> str:
    """Cents as a published ``FixedPointDollars`` string (``12345`` -> ``"123.4500"``)."""
    return f"{Decimal(cents) / 100:.4f}"


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
    return dict(order)


def error_body(code: str, message: str) -> bytes:
    """A published ``ErrorResponse`` body: ``code`` and ``message`` at the top level."""
    return orjson.dumps({"code": code, "message": message})
