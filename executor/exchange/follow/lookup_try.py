"""One try of a lookup: what the exchange's data timestamp and its listing say about some orders.

``executor.exchange.follow.reconcile`` asks about orders of unknown outcome in tries; each try is
:func:`ask_once`. It reads ``GET /exchange/user_data_timestamp`` first, then each ticker's
``GET /portfolio/orders`` pages: a listing read after the timestamp covers at least what the
timestamp says, so an order it lacks is *absent* when the timestamp is past the order's send plus
the margin (``executor.exchange.follow.lookup.absence_known``) and *unknown* otherwise. Found and
absent orders leave the pending set; an error is kept against an order until a later try answers
for it. Every request is the reader's signed ``get_json`` (the transport), each within
:data:`LOOKUP_TIMEOUT_S`; a timeout is an error like any other, never an exception out.

:func:`take_fed` is the other way to learn of an order: the exchange's stream may already have
reported it (an :class:`~executor.exchange.follow.reconcile_terms.OrderFeed`), so it needs no
request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import trio

from executor.exchange.follow.lookup import (
    ExchangeOrder,
    absence_known,
    find_orders,
    read_as_of_ms,
)
from executor.exchange.follow.reconcile_terms import Answers, OrderFeed, Unresolved, sent_ms
from executor.exchange.messages import ExchangeError
from executor.exchange.protocols import SignedReader

LOOKUP_TIMEOUT_S: Final = 5.0
"""Budget of one lookup, every page included, and of one read of the exchange's data timestamp
(seconds): half the transport's 10 s read budget, so four tries cannot hold a fire for a
minute."""

MIN_TS_MARGIN_S: Final = 60
"""How far before the order's send time the lookup starts (seconds): our clock and the
exchange's may disagree; a minute more of one ticker's orders is a page at most."""


async def ask_once(
    reader: SignedReader, pending: dict[str, Unresolved], answers: Answers, now_ms: int
) -> None:
    """One try for every order in ``pending`` (by ``client_order_id``): the data timestamp
    first, then each ticker's listing; orders found or known absent leave ``pending``.

    Cancellation: what the try learned before it was cut is in ``answers``.
    """
    as_of_ms: int | None = None
    as_of_error: str | None = None
    try:
        with trio.fail_after(LOOKUP_TIMEOUT_S):
            as_of_ms = await read_as_of_ms(reader)
    except (ExchangeError, trio.TooSlowError) as error:
        as_of_error = failure_text(error)
    by_ticker: dict[str, list[Unresolved]] = {}
    for order in pending.values():
        by_ticker.setdefault(order.row.ticker, []).append(order)
    for ticker, group in by_ticker.items():
        ids = [order.row.client_order_id for order in group]
        try:
            with trio.fail_after(LOOKUP_TIMEOUT_S):
                hits = await find_orders(reader, ticker, min_ts_s(group), ids)
        except (ExchangeError, trio.TooSlowError) as error:
            answers.errors.update(dict.fromkeys(ids, failure_text(error)))
            continue
        for order in group:
            key = order.row.client_order_id
            answers.errors.pop(key, None)
            if key in hits:
                answers.found[key] = hits[key]
                del pending[key]
            elif as_of_ms is None:
                answers.errors[key] = f"user data timestamp: {as_of_error}"
            elif absence_known(sent_ms(order.row), as_of_ms, now_ms):
                answers.absent.add(key)
                del pending[key]


def take_fed(
    feed: OrderFeed, pending: dict[str, Unresolved], found: dict[str, ExchangeOrder]
) -> None:
    """Move the pending orders the feed already told of into ``found``: no lookup for them."""
    for client_order_id in list(pending):
        order = feed.known(client_order_id)
        if order is not None:
            found[client_order_id] = order
            del pending[client_order_id]


def failure_text(error: Exception) -> str:
    """Why a request got no answer: the error's text, or the budget it ran out of."""
    return str(error) or f"no answer within {LOOKUP_TIMEOUT_S:g} s"


def min_ts_s(group: Sequence[Unresolved]) -> int:
    """The lookup's ``min_ts``: the earliest send in the group, less the margin (Unix s)."""
    return min(sent_ms(order.row) for order in group) // 1000 - MIN_TS_MARGIN_S


__all__ = [
    "LOOKUP_TIMEOUT_S",
    "MIN_TS_MARGIN_S",
    "ask_once",
    "failure_text",
    "min_ts_s",
    "take_fed",
]
