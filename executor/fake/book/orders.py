"""The fake exchange's order book as ``GET /portfolio/orders`` shows it, without I/O.

Every order the fake places is kept here as a :class:`BookOrder` (its own record, apart from the
response object the order endpoint answers with): what it was asked, what filled, what it cost and
when it was made, so the orders endpoint can page through them the way the published
``GetOrdersResponse`` describes (``tests/published/kalshi-openapi/get-orders.yaml``) with the
filters reconciliation uses (``ticker``, ``min_ts``, ``max_ts``, ``status``, ``limit``,
``cursor``). A resting order can later be filled or cancelled by the test (or the person) driving
the fake, which is how a good_till_canceled order is followed to its end.

Timestamps in the query are Unix seconds; an order's own time is kept in milliseconds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal
from urllib.parse import parse_qs

FAKE_USER_ID: Final = "fake-user"
"""``user_id`` of every order: the fake has one account."""

ORDERS_PAGE_SIZE: Final = 2
"""Most orders per page whatever ``limit`` asks (the real default is 100): small, so every client
that looks at a few orders follows a cursor."""

MAX_LIMIT: Final = 1000
"""The published maximum of ``limit``."""

BookStatus = Literal["resting", "canceled", "executed"]
"""The published ``OrderStatus`` values."""


class BadOrdersQuery(ValueError):
    """A query the orders endpoint refuses (the message says which parameter and why)."""


def _dollars(amount: Decimal) -> str:
    return f"{amount:.4f}"


def _count(amount: Decimal) -> str:
    return f"{amount:.2f}"


def iso_time(epoch_ms: int) -> str:
    """``epoch_ms`` as the published RFC 3339 time, to the millisecond, in UTC."""
    moment = dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class BookOrder:
    """One placed order and what has happened to it since.

    Attributes:
        order_id: the exchange's id (the order response's ``order_id``).
        client_order_id: the id the client chose.
        ticker: the market.
        book_side: ``bid`` (buys YES) or ``ask`` (buys NO).
        yes_price: the limit price on the YES side.
        initial: contracts asked for.
        filled: contracts filled so far.
        status: resting, canceled or executed.
        taker_cost / maker_cost: dollars paid for the taker / maker fills.
        taker_fees / maker_fees: fees paid on them, in dollars.
        created_ms / updated_ms: when it was placed / last changed (epoch ms).
        self_trade_prevention_type: as asked.
        exchange_index: the shard it was routed to.
        order_group_id: the order group it was placed in, or None.
        cancel_order_on_pause: whether a trading pause cancels it while it rests.
    """

    order_id: str
    client_order_id: str
    ticker: str
    book_side: str
    yes_price: Decimal
    initial: Decimal
    filled: Decimal
    status: BookStatus
    taker_cost: Decimal
    maker_cost: Decimal
    taker_fees: Decimal
    maker_fees: Decimal
    created_ms: int
    updated_ms: int
    self_trade_prevention_type: str
    exchange_index: int
    order_group_id: str | None = None
    cancel_order_on_pause: bool = False

    @property
    def remaining(self) -> Decimal:
        """Contracts still open (zero once executed or canceled)."""
        return self.initial - self.filled if self.status == "resting" else Decimal(0)

    def price_paid(self) -> Decimal:
        """What one contract costs this order's side: the YES price for a bid, NO for an ask."""
        return self.yes_price if self.book_side == "bid" else 1 - self.yes_price

    def as_published(self) -> dict[str, Any]:
        """The order as the published ``Order`` schema has it."""
        return {
            "order_id": self.order_id,
            "user_id": FAKE_USER_ID,
            "client_order_id": self.client_order_id,
            "ticker": self.ticker,
            "outcome_side": "yes" if self.book_side == "bid" else "no",
            "book_side": self.book_side,
            "type": "limit",
            "status": self.status,
            "yes_price_dollars": _dollars(self.yes_price),
            "no_price_dollars": _dollars(1 - self.yes_price),
            "fill_count_fp": _count(self.filled),
            "remaining_count_fp": _count(self.remaining),
            "initial_count_fp": _count(self.initial),
            "taker_fill_cost_dollars": _dollars(self.taker_cost),
            "maker_fill_cost_dollars": _dollars(self.maker_cost),
            "taker_fees_dollars": _dollars(self.taker_fees),
            "maker_fees_dollars": _dollars(self.maker_fees),
            "created_time": iso_time(self.created_ms),
            "last_update_time": iso_time(self.updated_ms),
            "self_trade_prevention_type": self.self_trade_prevention_type,
            "order_group_id": self.order_group_id,
            "cancel_order_on_pause": self.cancel_order_on_pause,
            "exchange_index": self.exchange_index,
        }


class Listing:
    """Every state each order has been in, by when it began: the book as of any moment.

    Keyed as the account's book (``client_order_id``, or ``order_id`` for an order without one).
    """

    def __init__(self) -> None:
        self._states: dict[str, list[tuple[int, BookOrder]]] = {}

    def record(self, key: str, entry: BookOrder, at_ms: int) -> None:
        """``entry`` as it is now (a copy) became the order's state at ``at_ms``."""
        self._states.setdefault(key, []).append((at_ms, dataclasses.replace(entry)))

    def forget(self, key: str) -> None:
        """The order leaves the listing altogether (as the historical cutoff moves it out)."""
        self._states.pop(key, None)

    def as_of(self, at_ms: int) -> dict[str, BookOrder]:
        """Each order in the state it was in at ``at_ms``; orders placed later are absent."""
        view: dict[str, BookOrder] = {}
        for key, states in self._states.items():
            shown = [entry for began_ms, entry in states if began_ms <= at_ms]
            if shown:
                view[key] = shown[-1]
        return view


@dataclass(frozen=True, slots=True)
class OrdersQuery:
    """The filters of one ``GET /portfolio/orders`` request."""

    ticker: str | None = None
    min_ts: int | None = None
    max_ts: int | None = None
    status: str | None = None
    limit: int = 100
    offset: int = 0


def parse_orders_query(query: str) -> OrdersQuery:
    """The filters in a query string; the cursor is this fake's offset ("" = the first page).

    Raises:
        BadOrdersQuery: a number that is not one, a limit outside 1..1000, an unknown status.
    """
    fields = {name: values[-1] for name, values in parse_qs(query).items()}

    def integer(name: str) -> int | None:
        text = fields.get(name)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise BadOrdersQuery(f"{name} must be an integer, got {text!r}") from None

    limit = integer("limit")
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise BadOrdersQuery(f"limit must be from 1 to {MAX_LIMIT}, got {limit}")
    status = fields.get("status")
    if status is not None and status not in {"resting", "canceled", "executed"}:
        raise BadOrdersQuery(f"status must be resting, canceled or executed, got {status!r}")
    cursor = fields.get("cursor", "")
    if cursor and not cursor.isdigit():
        raise BadOrdersQuery(f"bad cursor {cursor!r}")
    return OrdersQuery(
        ticker=fields.get("ticker"),
        min_ts=integer("min_ts"),
        max_ts=integer("max_ts"),
        status=status,
        limit=100 if limit is None else limit,
        offset=int(cursor) if cursor else 0,
    )


def orders_page(book: dict[str, BookOrder], query: OrdersQuery) -> dict[str, Any]:
    """One ``GetOrdersResponse`` page: matching orders newest first, and the next cursor."""
    matching = [
        order
        for order in book.values()
        if (query.ticker is None or order.ticker == query.ticker)
        and (query.min_ts is None or order.created_ms >= query.min_ts * 1000)
        and (query.max_ts is None or order.created_ms <= query.max_ts * 1000)
        and (query.status is None or order.status == query.status)
    ]
    matching.sort(key=lambda order: order.created_ms, reverse=True)
    size = min(query.limit, ORDERS_PAGE_SIZE)
    page = matching[query.offset : query.offset + size]
    following = query.offset + size
    return {
        "orders": [order.as_published() for order in page],
        "cursor": str(following) if following < len(matching) else "",
    }


__all__ = [
    "FAKE_USER_ID",
    "MAX_LIMIT",
    "ORDERS_PAGE_SIZE",
    "BadOrdersQuery",
    "BookOrder",
    "BookStatus",
    "Listing",
    "OrdersQuery",
    "iso_time",
    "orders_page",
    "parse_orders_query",
]
