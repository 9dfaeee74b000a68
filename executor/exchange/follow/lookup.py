"""Asking the exchange what became of orders: ``GET /portfolio/orders``, read as audit columns.

Reconciliation (``executor.exchange.follow.reconcile``) needs one thing from the exchange: for a few
``client_order_id`` values on one ticker, the order as the exchange has it. :func:`find_orders`
pages through ``GET /trade-api/v2/portfolio/orders?ticker=..&min_ts=..`` (signed; ``cursor``
followed) until every id asked about is found or the pages end, and :func:`parse_exchange_order`
turns each published ``Order`` (``tests/published/kalshi-openapi/get-orders.yaml``) into the
values an ``orders_fired`` row holds, in the fixed-point form the order response uses:

- status: ``executed`` or any fill -> ``filled``; ``resting`` -> ``accepted``; ``canceled`` with
  nothing filled -> ``canceled`` (DISPATCH.md §4 step 6's rule, on the exchange's numbers);
- ``fill_count`` / ``remaining_count``: ``fill_count_fp`` / ``remaining_count_fp`` verbatim;
- ``average_fill_price``: the fill cost (taker + maker) per contract filled, on the YES side as
  the order response quotes it (one minus the NO cost for an ``ask``), 4 decimals; NULL when
  nothing filled, as the order response omits it;
- ``average_fee_paid``: fees (taker + maker) per contract filled, 4 decimals; NULL likewise.

``min_ts`` is Unix *seconds* (the published parameter is a "Unix timestamp"; the order endpoints'
other times in seconds, ``expiration_time``, read the same way).

Not finding an order proves nothing by itself: the exchange lists what it has processed "after a
short delay". :func:`read_as_of_ms` reads ``GET /exchange/user_data_timestamp``
(``get-user-data-timestamp.yaml``: when the data behind GetOrder(s) was last validated), which is
what lets a caller say an order is absent rather than not listed yet.

Sans telemetry: the HTTP request is whatever ``reader`` does (the transport's signed ``get_json``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from executor.exchange.messages import ORDERS_PATH, USER_DATA_TIMESTAMP_PATH, ExchangeError
from executor.exchange.protocols import SignedReader
from executor.recording.orders.open_orders import LIVE_WINDOW_MS
from executor.recording.rows import OrderStatus

MAX_ORDER_PAGES: Final = 100
"""Pages followed in one lookup before giving up: at the exchange's default of 100 orders a page,
10,000 orders on one ticker since ``min_ts``; a cursor that runs further is an exchange bug."""

PAGE_LIMIT: Final = 200
"""``limit`` asked per page (the published maximum is 1000): one page covers a busy ticker's
last minutes, and a page stays small enough to parse in well under a millisecond."""

ABSENCE_MARGIN_MS: Final = 10_000
"""How much later than an order's send (ms) the exchange's data must be validated before an order
it does not list is called absent. It covers the request's time to the exchange (it is refused
once its signed timestamp is stale: 5 s on the fake; Kalshi does not publish its window, so a
guess) and our clock's disagreement with the exchange's (NTP keeps it to milliseconds; a few
seconds is slack)."""

_FILL_DECIMALS: Final = Decimal("0.0001")
"""Averages are written with 4 decimals, as the order response's fixed-point dollars are."""


@dataclass(frozen=True, slots=True)
class ExchangeOrder:
    """One order as the exchange has it, in ``orders_fired`` terms.

    Attributes:
        order_id: the exchange's id (``kalshi_order_id``).
        client_order_id: ours.
        exchange_status: the published status (resting, canceled, executed).
        status: the row's status (filled, accepted, canceled).
        fill_count / remaining_count: fixed-point strings, verbatim.
        average_fill_price / average_fee_paid: fixed-point strings, None when nothing filled.
        filled: ``fill_count`` as a number (what the risk gate is told).
    """

    order_id: str
    client_order_id: str
    exchange_status: str
    status: OrderStatus
    fill_count: str
    remaining_count: str
    average_fill_price: str | None
    average_fee_paid: str | None
    filled: float

    @property
    def resting(self) -> bool:
        """Whether the order is still on the book (it may fill or be cancelled later)."""
        return self.exchange_status == "resting"


def _decimal(entry: Mapping[str, Any], name: str) -> Decimal:
    value = entry.get(name)
    if not isinstance(value, str):
        raise ExchangeError(f"orders response: {name} is not a string: {value!r:.100}")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise ExchangeError(f"orders response: {name} is not a number: {value!r:.100}") from None
    if not number.is_finite():
        raise ExchangeError(f"orders response: {name} is not finite: {value!r:.100}")
    return number


def _optional_decimal(entry: Mapping[str, Any], name: str) -> Decimal:
    return _decimal(entry, name) if entry.get(name) is not None else Decimal(0)


def parse_exchange_order(entry: object) -> ExchangeOrder:
    """One published ``Order`` as audit columns (the module docstring has the mapping).

    Raises:
        ExchangeError: the entry lacks a field the mapping needs, or has one of the wrong type.
    """
    if not isinstance(entry, dict):
        raise ExchangeError(f"orders response: entry is not an object: {entry!r:.200}")
    order_id, client_order_id = entry.get("order_id"), entry.get("client_order_id")
    exchange_status = entry.get("status")
    if not (isinstance(order_id, str) and isinstance(client_order_id, str)):
        raise ExchangeError(f"orders response: entry without string ids: {entry!r:.200}")
    if exchange_status not in ("resting", "canceled", "executed"):
        raise ExchangeError(f"orders response: unknown status {exchange_status!r:.50}")
    filled = _decimal(entry, "fill_count_fp")
    _decimal(entry, "remaining_count_fp")  # validated: it is written verbatim below
    if filled > 0 or exchange_status == "executed":
        status = OrderStatus.FILLED
    elif exchange_status == "resting":
        status = OrderStatus.ACCEPTED
    else:
        status = OrderStatus.CANCELED
    average_price: str | None = None
    average_fee: str | None = None
    if filled > 0:
        cost = _optional_decimal(entry, "taker_fill_cost_dollars") + _optional_decimal(
            entry, "maker_fill_cost_dollars"
        )
        fees = _optional_decimal(entry, "taker_fees_dollars") + _optional_decimal(
            entry, "maker_fees_dollars"
        )
        per_contract = cost / filled
        yes_price = per_contract if entry.get("book_side", "bid") == "bid" else 1 - per_contract
        average_price = str(yes_price.quantize(_FILL_DECIMALS))
        average_fee = str((fees / filled).quantize(_FILL_DECIMALS))
    return ExchangeOrder(
        order_id=order_id,
        client_order_id=client_order_id,
        exchange_status=str(exchange_status),
        status=status,
        fill_count=str(entry["fill_count_fp"]),
        remaining_count=str(entry["remaining_count_fp"]),
        average_fill_price=average_price,
        average_fee_paid=average_fee,
        filled=float(filled),
    )


async def find_orders(
    reader: SignedReader, ticker: str, min_ts_s: int, client_order_ids: Collection[str]
) -> dict[str, ExchangeOrder]:
    """The orders among ``client_order_ids`` the exchange has on ``ticker`` since ``min_ts_s``.

    Pages are followed until every id is found or the cursor ends; an id absent from the result
    is one the exchange does not have (in that window).

    Raises:
        ExchangeError: a page failed or was malformed, or the cursor never ended.
    """
    wanted = set(client_order_ids)
    found: dict[str, ExchangeOrder] = {}
    params = {"ticker": ticker, "min_ts": str(min_ts_s), "limit": str(PAGE_LIMIT)}
    for _ in range(MAX_ORDER_PAGES):
        payload = await reader.get_json(ORDERS_PATH, params)
        entries = payload.get("orders")
        if not isinstance(entries, list):
            raise ExchangeError("orders response: 'orders' is not a list")
        for entry in entries:
            if isinstance(entry, dict) and entry.get("client_order_id") in wanted:
                order = parse_exchange_order(entry)
                found[order.client_order_id] = order
        cursor = payload.get("cursor")
        if len(found) == len(wanted) or not cursor:
            return found
        params = {**params, "cursor": str(cursor)}
    raise ExchangeError(f"orders: cursor still set after {MAX_ORDER_PAGES} pages")


_FRACTION: Final = re.compile(r"(\.\d{6})\d+")
"""Digits of a second beyond microseconds (Python's ``fromisoformat`` takes at most six)."""


def parse_as_of_ms(value: object) -> int:
    """An RFC 3339 ``date-time`` (``as_of_time``) as epoch ms; a time without a zone is UTC.

    Raises:
        ExchangeError: not a string, or not a date-time.
    """
    if not isinstance(value, str):
        raise ExchangeError(f"user data timestamp: as_of_time is not a string: {value!r:.100}")
    text = _FRACTION.sub(r"\1", value.strip())
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ExchangeError(f"user data timestamp: not a date-time: {value!r:.100}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def absence_known(sent_ms: int, as_of_ms: int, now_ms: int) -> bool:
    """Whether an order sent at ``sent_ms`` that the listing lacks is absent, not late: the
    exchange's data was validated (``as_of_ms``, read before the listing) more than
    :data:`ABSENCE_MARGIN_MS` after the send, and the live listing still covers the send (it is
    younger than ``LIVE_WINDOW_MS``; the lookup's ``min_ts`` is before it by construction)."""
    return as_of_ms > sent_ms + ABSENCE_MARGIN_MS and now_ms - sent_ms < LIVE_WINDOW_MS


async def read_as_of_ms(reader: SignedReader) -> int:
    """When the data behind the orders list was last validated (epoch ms).

    Raises:
        ExchangeError: the request failed, or its answer has no readable ``as_of_time``.
    """
    payload = await reader.get_json(USER_DATA_TIMESTAMP_PATH)
    return parse_as_of_ms(payload.get("as_of_time"))


async def list_orders(
    reader: SignedReader, min_ts_s: int, *, max_pages: int = MAX_ORDER_PAGES
) -> list[dict[str, Any]]:
    """Every order of the account created since ``min_ts_s``, whatever its ticker (adoption's
    listing), as the published ``Order`` objects; at most ``max_pages`` pages.

    Raises:
        ExchangeError: a page failed or was malformed, or the cursor never ended.
    """
    listed: list[dict[str, Any]] = []
    params = {"min_ts": str(min_ts_s), "limit": str(PAGE_LIMIT)}
    for _ in range(max_pages):
        payload = await reader.get_json(ORDERS_PATH, params)
        entries = payload.get("orders")
        if not isinstance(entries, list):
            raise ExchangeError("orders response: 'orders' is not a list")
        listed.extend(entry for entry in entries if isinstance(entry, dict))
        cursor = payload.get("cursor")
        if not cursor:
            return listed
        params = {**params, "cursor": str(cursor)}
    raise ExchangeError(f"orders: cursor still set after {max_pages} pages")


__all__ = [
    "ABSENCE_MARGIN_MS",
    "MAX_ORDER_PAGES",
    "PAGE_LIMIT",
    "ExchangeOrder",
    "absence_known",
    "find_orders",
    "list_orders",
    "parse_as_of_ms",
    "parse_exchange_order",
    "read_as_of_ms",
]
