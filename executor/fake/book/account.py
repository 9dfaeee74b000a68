"""The fake exchange's account and order book, without I/O (DISPATCH.md §9).

What the exchange decides for a request once it is authenticated: place an order (fill, kill or
rest; a ``client_order_id`` already used answers 409; ``executor.fake.book.placing``), read the
balance and page through positions (``executor.fake.book.portfolio``) and orders
(``executor.fake.book.orders``), one order by its id, the user data timestamp, fill or cancel a
resting order later, cancel a batch of orders (V2), keep order groups
(``executor.fake.book.groups``: create, get, trigger, reset; a triggered group's resting orders
cancelled and its new orders refused) and say what the account's rate limits are
(``executor.fake.limits``).

The orders endpoints lag like Kalshi's ("a short delay before exchange events are reflected"):
with :attr:`FakeAccount.listing_lag_s` set, ``GET /portfolio/orders`` and
``GET /portfolio/orders/{order_id}`` show the book as it stood that long ago (an order placed
since is absent, a fill since not yet counted), and ``GET /exchange/user_data_timestamp`` says
so: its ``as_of_time`` is that same moment, the honest bound of what the listing covers.

The HTTPS server in ``executor.fake.exchange`` inherits this and adds TLS, HTTP and signature
checks.

Requests are routed by :data:`ROUTES` (``executor.fake.routes``): one line per endpoint, naming
the account method that answers it. Every change to the book is announced to the callables in
:attr:`FakeAccount.watchers` as a :class:`BookEvent` (an order placed, a fill, a cancel), so
anything that must see the book move (a stream of order updates, a test) hooks in there instead
of into each endpoint. Order-group changes go to :attr:`FakeAccount.group_watchers` (the groups'
own list, ``executor.fake.book.groups.GroupEvent``): a second list, since a group event is about no
one order.

Every body it answers has the shape of Kalshi's published OpenAPI (vendored in
``tests/published/kalshi-openapi/``; a test validates each against it): the order response
carries only the ``CreateOrderV2Response`` fields (``ts_ms`` included; what the exchange knows
beyond them is kept in ``book``), the balance and the positions every required field, and an
error the ``ErrorResponse`` shape, ``code`` and ``message`` at the top level (a 429 the published
``{"error": "too many requests"}``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

import orjson

from executor.clock import wall_ms
from executor.fake.book.control import BookControl, ExchangePauses
from executor.fake.book.groups import FakeOrderGroup, GroupEvent, OrderGroups
from executor.fake.book.orders import (
    BadOrdersQuery,
    BookOrder,
    Listing,
    iso_time,
    orders_page,
    parse_orders_query,
)
from executor.fake.book.placing import book_entry, fee_per_contract, parse_order
from executor.fake.book.portfolio import DEFAULT_BALANCE_CENTS, Portfolio
from executor.fake.limits import FakeApiLimits
from executor.fake.routes import ErrorReply, Route, RouteTable

ORDER_PATH: Final = "/trade-api/v2/portfolio/events/orders"
BALANCE_PATH: Final = "/trade-api/v2/portfolio/balance"
POSITIONS_PATH: Final = "/trade-api/v2/portfolio/positions"
ORDERS_PATH: Final = "/trade-api/v2/portfolio/orders"
BATCH_CANCEL_PATH: Final = "/trade-api/v2/portfolio/events/orders/batched"
ORDER_GROUPS_PATH: Final = "/trade-api/v2/portfolio/order_groups"
LIMITS_PATH: Final = "/trade-api/v2/account/limits"
ENDPOINT_COSTS_PATH: Final = "/trade-api/v2/account/endpoint_costs"
ONE_ORDER_PATH: Final = "/trade-api/v2/portfolio/orders/{order_id}"
USER_DATA_TIMESTAMP_PATH: Final = "/trade-api/v2/exchange/user_data_timestamp"
EXCHANGE_STATUS_PATH: Final = "/trade-api/v2/exchange/status"
# Written out rather than imported from executor.exchange.orders.transport: the fake checks the
# transport, so it must not share its constants (a test asserts the two agree).
ROUTES: Final = RouteTable(
    [
        Route("POST", ORDER_PATH, "post_order", status=201),
        Route("GET", BALANCE_PATH, "get_balance"),
        Route("GET", POSITIONS_PATH, "get_positions"),
        Route("GET", ORDERS_PATH, "get_orders"),
        Route("DELETE", BATCH_CANCEL_PATH, "delete_orders_batched"),
        Route("POST", f"{ORDER_GROUPS_PATH}/create", "post_order_group", status=201),
        Route("GET", f"{ORDER_GROUPS_PATH}/{{order_group_id}}", "get_order_group"),
        Route("PUT", f"{ORDER_GROUPS_PATH}/{{order_group_id}}/trigger", "put_group_trigger"),
        Route("PUT", f"{ORDER_GROUPS_PATH}/{{order_group_id}}/reset", "put_group_reset"),
        Route("GET", LIMITS_PATH, "get_account_limits"),
        Route("GET", ENDPOINT_COSTS_PATH, "get_endpoint_costs"),
        Route("GET", ONE_ORDER_PATH, "get_one_order"),
        Route("GET", USER_DATA_TIMESTAMP_PATH, "get_user_data_timestamp"),
        Route("GET", EXCHANGE_STATUS_PATH, "get_exchange_status"),
    ]
)
"""Every endpoint the fake serves and the account method that answers it."""
ENDPOINTS: Final = ROUTES.endpoints()
"""Every ``(path, method)`` the fake serves (a test validates each answer against the published
API)."""

TOO_MANY_REQUESTS_BODY: Final = b'{"error":"too many requests"}'
"""The body of the published 429 example (not in the ``ErrorResponse`` shape)."""

ORDER_EXISTS_CODE: Final = "order_already_exists"
"""``code`` of the 409 a repeated ``client_order_id`` gets. The published ``ConflictError`` says
only "resource already exists"; the code is this fake's choice (Kalshi's is not published)."""
ORDER_EXISTS_MESSAGE: Final = "an order with this client_order_id already exists"

BookEventKind = Literal["placed", "fill", "canceled"]


@dataclass(frozen=True)
class BookEvent:
    """One change to the order book, as the account's watchers see it.

    Attributes:
        kind: ``placed`` (a new order, whatever became of it at once), ``fill`` (contracts of a
            resting order filled later) or ``canceled`` (a resting order cancelled).
        order: the order's record after the change.
        contracts: the contracts the change is about (placed: filled at placement; fill: filled
            now; canceled: what was left).
        ts_ms: when it happened (wall-clock ms).
    """

    kind: BookEventKind
    order: BookOrder
    contracts: Decimal
    ts_ms: int


def always_fill(order: dict[str, Any]) -> bool:
    """The default fill rule: every fill_or_kill and immediate_or_cancel order fills in full."""
    return True


def never_fill(order: dict[str, Any]) -> bool:
    """A fill rule that kills every fill_or_kill and immediate_or_cancel order."""
    return False


class FakeAccount(Portfolio, BookControl):
    """One account: a balance, positions and orders, answering the endpoints of :data:`ROUTES`.

    Attributes (besides the portfolio's ``balance_cents``, ``positions`` and ``markets``):
        orders: the response of every placed order, by ``client_order_id`` (by ``order_id`` for
            an order sent without one).
        book: every placed order as it is now, keyed as ``orders``.
        fill_rule: order JSON -> fill (True) or kill (False) for fill_or_kill / IOC orders.
        watchers: called with every :class:`BookEvent`, in order (a watcher must not raise).
        order_groups: the account's order groups.
        api_limits: the rate limits the account advertises (settable).
        listing_lag_s: how far behind the book the orders endpoints and the user data
            timestamp are (seconds, settable; 0 = up to date).
        clock: the exchange's wall clock in ms (settable: a test may move the exchange's time).
        pauses: the exchange's pauses, set by hand or the weekly one
            (``executor.fake.book.control.ExchangePauses``).
    """

    def __init__(
        self,
        *,
        balance_cents: int = DEFAULT_BALANCE_CENTS,
        fill_rule: Callable[[dict[str, Any]], bool] = always_fill,
        listing_lag_s: float = 0.0,
    ) -> None:
        super().__init__(balance_cents=balance_cents)
        self.orders: dict[str, dict[str, Any]] = {}
        self.book: dict[str, BookOrder] = {}
        self.fill_rule = fill_rule
        self.watchers: list[Callable[[BookEvent], None]] = []
        self.listing_lag_s = listing_lag_s
        self.clock: Callable[[], int] = wall_ms
        self._listing = Listing()
        self.order_groups = OrderGroups()
        self.api_limits = FakeApiLimits()
        self.pauses = ExchangePauses(lambda: self.clock())

    @property
    def group_watchers(self) -> list[Callable[[GroupEvent], None]]:
        """Called with every order-group change (``executor.fake.book.groups.GroupEvent``)."""
        return self.order_groups.watchers

    def answer(self, method: str, path: str, query: str, body: bytes) -> tuple[int, bytes]:
        """(status, JSON body) for one authenticated request."""
        try:
            route, params = ROUTES.find(method, path)
            handler: Callable[[dict[str, str], str, bytes], dict[str, Any]] = getattr(
                self, route.handler
            )
            payload = handler(params, query, body)
        except ErrorReply as reply:
            return reply.status, error_body(reply.code, reply.message)
        return route.status, orjson.dumps(payload)

    def post_order(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``POST /portfolio/events/orders``: place the order in ``body`` (409 if its
        ``client_order_id`` was used before)."""
        return self.place_order(body)

    def get_balance(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /portfolio/balance``."""
        return self.balance()

    def get_positions(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /portfolio/positions``: one page, from the query's cursor."""
        return self.positions_page(query)

    def get_orders(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /portfolio/orders``: one page (filters in ``query``; 400 for a bad one)."""
        return self.orders_list_page(query)

    def get_one_order(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /portfolio/orders/{order_id}``: the order as listed now (404 if not listed)."""
        for entry in self.listed().values():
            if entry.order_id == params["order_id"]:
                return {"order": entry.as_published()}
        raise ErrorReply(404, "not_found", f"no order {params['order_id']!r:.100}")

    def get_user_data_timestamp(
        self, params: dict[str, str], query: str, body: bytes
    ) -> dict[str, Any]:
        """``GET /exchange/user_data_timestamp``: the moment the orders listing shows."""
        return {"as_of_time": iso_time(self.listed_as_of_ms())}

    def get_exchange_status(
        self, params: dict[str, str], query: str, body: bytes
    ) -> dict[str, Any]:
        """``GET /exchange/status``: whether the exchange and trading are active now."""
        return self.pauses.status()

    def listed_as_of_ms(self) -> int:
        """The moment the orders endpoints show the book at (now less the listing lag, ms)."""
        return self.clock() - round(self.listing_lag_s * 1000)

    def listed(self) -> dict[str, BookOrder]:
        """The book as the orders endpoints show it now (``listing_lag_s`` behind)."""
        return self._listing.as_of(self.listed_as_of_ms())

    def archive(self, key: str) -> None:
        """Take an order out of the listing for good, as the historical cutoff does (its
        ``client_order_id`` stays used: a repeat still answers 409)."""
        self.book.pop(key, None)
        self._listing.forget(key)

    def place_order(self, body: bytes) -> dict[str, Any]:
        """Place the order in ``body``; its response object.

        Raises:
            ErrorReply: 400 for a body that is not an order or an account that cannot pay; 409
                for a ``client_order_id`` already used (nothing placed, nothing announced).
        """
        order = parse_order(body)
        self.pauses.refuse_placing()
        client_order_id = order.get("client_order_id")
        if client_order_id is not None and client_order_id in self.orders:
            raise ErrorReply(409, ORDER_EXISTS_CODE, ORDER_EXISTS_MESSAGE)
        group = self.order_groups.admit(order)
        count, price = Decimal(order["count"]), Decimal(order["price"])
        count_text = f"{count:.2f}"
        response: dict[str, Any] = {"order_id": str(uuid.uuid4())}  # Kalshi's ids are UUIDs
        if client_order_id is not None:
            response["client_order_id"] = client_order_id
        if order["time_in_force"] == "good_till_canceled" or not self.fill_rule(order):
            response.update(fill_count="0.00", remaining_count=count_text)
        else:
            fee_dollars = fee_per_contract(price)
            notional = count * (price if order["side"] == "bid" else 1 - price)
            cost_cents = math.ceil((notional + count * fee_dollars) * 100)
            if cost_cents > self.balance_cents:
                raise ErrorReply(400, "insufficient_balance", f"order costs {cost_cents} cents")
            self.balance_cents -= cost_cents
            self.book_fill(
                order["ticker"],
                max(order.get("exchange_index", 0), 0),  # -1: routed by ticker
                math.ceil(notional * 100),
                math.ceil(count * fee_dollars * 100),
                float(count) if order["side"] == "bid" else -float(count),
            )
            response.update(
                fill_count=count_text,
                remaining_count="0.00",
                average_fill_price=order["price"],
                average_fee_paid=f"{fee_dollars:.4f}",
            )
        now_ms = self.clock()
        response["ts_ms"] = now_ms
        key = client_order_id if client_order_id is not None else response["order_id"]
        self.orders[key] = response
        entry = self.book[key] = book_entry(order, response, now_ms)
        self._announce("placed", key, entry, entry.filled)
        if group is not None:
            group.order_ids.append(entry.order_id)
            self._group_matched(group, entry.filled)
        return response

    def orders_list_page(self, query: str) -> dict[str, Any]:
        """One page of ``GET /portfolio/orders`` as listed now (filters in ``query``; 400 for a
        bad one)."""
        try:
            return orders_page(self.listed(), parse_orders_query(query))
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
        signed = float(amount) if entry.book_side == "bid" else -float(amount)
        self.book_fill(entry.ticker, entry.exchange_index, cost_cents, 0, signed)
        entry.filled += amount
        entry.maker_cost += amount * entry.price_paid()
        if entry.filled == entry.initial:
            entry.status = "executed"
        entry.updated_ms = self.clock()
        self._announce("fill", client_order_id, entry, amount)
        if entry.order_group_id is not None:
            self._group_matched(self.order_groups.find(entry.order_group_id), amount)
        return entry

    def cancel_resting(self, client_order_id: str) -> BookOrder:
        """Cancel a resting order (what has filled stays filled).

        Raises:
            KeyError: no such order. ValueError: it is not resting.
        """
        entry = self.book[client_order_id]
        if entry.status != "resting":
            raise ValueError(f"order {client_order_id} is {entry.status}, not resting")
        left = entry.remaining
        entry.status = "canceled"
        entry.updated_ms = self.clock()
        self._announce("canceled", client_order_id, entry, left)
        return entry

    def _group_matched(self, group: FakeOrderGroup, contracts: Decimal) -> None:
        if self.order_groups.matched(group, contracts, wall_ms()):
            self.trigger_group(group)

    def _announce(
        self, kind: BookEventKind, key: str, entry: BookOrder, contracts: Decimal
    ) -> None:
        self._listing.record(key, entry, entry.updated_ms)
        event = BookEvent(kind, entry, contracts, entry.updated_ms)
        for watcher in self.watchers:
            watcher(event)


def error_body(code: str, message: str) -> bytes:
    """A published ``ErrorResponse`` body: ``code`` and ``message`` at the top level."""
    return orjson.dumps({"code": code, "message": message})


__all__ = [
    "BALANCE_PATH",
    "BATCH_CANCEL_PATH",
    "DEFAULT_BALANCE_CENTS",
    "ENDPOINTS",
    "ENDPOINT_COSTS_PATH",
    "LIMITS_PATH",
    "ONE_ORDER_PATH",
    "ORDERS_PATH",
    "ORDER_EXISTS_CODE",
    "ORDER_EXISTS_MESSAGE",
    "ORDER_GROUPS_PATH",
    "ORDER_PATH",
    "POSITIONS_PATH",
    "ROUTES",
    "TOO_MANY_REQUESTS_BODY",
    "USER_DATA_TIMESTAMP_PATH",
    "BookEvent",
    "ErrorReply",
    "FakeAccount",
    "GroupEvent",
    "always_fill",
    "error_body",
    "never_fill",
]
