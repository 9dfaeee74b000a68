"""What the fake exchange's stream says, without I/O: book changes as WebSocket API v2 messages.

The fake's stream (``executor.fake.stream``) turns every
:class:`~executor.fake.book.account.BookEvent` into the messages Kalshi publishes for it
(``tests/published/kalshi-openapi/asyncapi.yaml``; a test validates each against it):

- an order placed: a ``user_order`` message (its state after placement), preceded by a ``fill``
  message (``is_taker`` true) when it filled at once;
- a resting order filled later: a ``fill`` message (``is_taker`` false, the maker's side, no
  fee here) and then a ``user_order`` message with the order's new totals;
- a resting order cancelled: a ``user_order`` message (status ``canceled``).

``order_group_updates`` messages are made by :func:`order_group_message` for whatever announces
a group's life (the fake's order groups are another branch's; :meth:`executor.fake.stream.
StreamHub.publish_order_group` is the seam). Replies to commands (``subscribed``,
``unsubscribed``, ``error``) are here too. Each message is a dict without its ``sid``: the hub
adds the subscription id of the session it goes to.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any, Final

from executor.fake.book.orders import BookOrder, iso_time

FAKE_USER_UUID: Final = "0b5e6f3c-2d1a-4e7b-9c8d-7f6a5b4c3d2e"
"""``user_id`` of the fake's one account in stream messages (the published field is a UUID)."""

SERVED_CHANNELS: Final = ("fill", "user_orders", "order_group_updates")
"""The private channels the fake's stream serves (the rest of the published list answers
"Unknown channel name")."""

# Published error codes the fake answers with (asyncapi.yaml, ``errorResponsePayload``).
UNABLE_TO_PROCESS: Final = (1, "Unable to process message")
PARAMS_REQUIRED: Final = (2, "Params required")
CHANNELS_REQUIRED: Final = (3, "Channels required")
UNKNOWN_COMMAND: Final = (5, "Unknown command")
ALREADY_SUBSCRIBED: Final = (6, "Already subscribed")
UNKNOWN_SUBSCRIPTION: Final = (7, "Unknown subscription ID")
UNKNOWN_CHANNEL: Final = (8, "Unknown channel name")


def _count(amount: Decimal) -> str:
    return f"{amount:.2f}"


def _dollars(amount: Decimal) -> str:
    return f"{amount:.4f}"


def _outcome(order: BookOrder) -> str:
    return "yes" if order.book_side == "bid" else "no"


def fill_message(
    order: BookOrder, contracts: Decimal, *, is_taker: bool, post_position: float, ts_ms: int
) -> dict[str, Any]:
    """A ``fill`` message: ``contracts`` of ``order`` filled at its limit price at ``ts_ms``.

    The fee is the order's taker fee per contract for a taker fill, nothing for a maker (the fake
    charges makers none). ``post_position`` is the account's signed position on the ticker after
    the fill.
    """
    fee = order.taker_fees / order.filled * contracts if is_taker and order.filled else Decimal(0)
    outcome = _outcome(order)
    return {
        "type": "fill",
        "msg": {
            "trade_id": str(uuid.uuid4()),
            "order_id": order.order_id,
            "market_ticker": order.ticker,
            "exchange_index": order.exchange_index,
            "is_taker": is_taker,
            "side": outcome,
            "yes_price_dollars": _dollars(order.yes_price),
            "count_fp": _count(contracts),
            "fee_cost": _dollars(fee),
            "action": "buy",
            "ts": ts_ms // 1000,
            "ts_ms": ts_ms,
            "client_order_id": order.client_order_id,
            "post_position_fp": f"{post_position:.2f}",
            "purchased_side": outcome,
            "outcome_side": outcome,
            "book_side": order.book_side,
        },
    }


def user_order_message(order: BookOrder) -> dict[str, Any]:
    """A ``user_order`` message: ``order`` as it stands now (totals, not the change)."""
    outcome = _outcome(order)
    return {
        "type": "user_order",
        "msg": {
            "order_id": order.order_id,
            "user_id": FAKE_USER_UUID,
            "ticker": order.ticker,
            "status": order.status,
            "side": outcome,
            "is_yes": outcome == "yes",
            "outcome_side": outcome,
            "book_side": order.book_side,
            "yes_price_dollars": _dollars(order.yes_price),
            "fill_count_fp": _count(order.filled),
            "remaining_count_fp": _count(order.remaining),
            "initial_count_fp": _count(order.initial),
            "taker_fill_cost_dollars": _dollars(order.taker_cost),
            "maker_fill_cost_dollars": _dollars(order.maker_cost),
            "taker_fees_dollars": _dollars(order.taker_fees),
            "maker_fees_dollars": _dollars(order.maker_fees),
            "client_order_id": order.client_order_id,
            "self_trade_prevention_type": order.self_trade_prevention_type,
            "created_time": iso_time(order.created_ms),
            "created_ts_ms": order.created_ms,
            "last_update_time": iso_time(order.updated_ms),
            "last_updated_ts_ms": order.updated_ms,
        },
    }


def order_group_message(
    event_type: str, order_group_id: str, ts_ms: int, contracts_limit_fp: str | None = None
) -> dict[str, Any]:
    """An ``order_group_updates`` message (its ``seq`` is the hub's, added when sent)."""
    msg: dict[str, Any] = {"event_type": event_type, "order_group_id": order_group_id}
    if contracts_limit_fp is not None:
        msg["contracts_limit_fp"] = contracts_limit_fp
    msg["ts_ms"] = ts_ms
    return {"type": "order_group_updates", "msg": msg}


def subscribed_reply(command_id: int, channel: str, sid: int) -> dict[str, Any]:
    """The ``subscribed`` reply to one channel of a ``subscribe`` command."""
    return {"id": command_id, "type": "subscribed", "msg": {"channel": channel, "sid": sid}}


def unsubscribed_reply(command_id: int, sid: int, seq: int) -> dict[str, Any]:
    """The ``unsubscribed`` reply for one subscription id of an ``unsubscribe`` command."""
    return {"id": command_id, "sid": sid, "seq": seq, "type": "unsubscribed"}


def error_reply(command_id: int | None, error: tuple[int, str]) -> dict[str, Any]:
    """An ``error`` reply (``command_id`` None: the command had none, or was not JSON)."""
    code, text = error
    reply: dict[str, Any] = {"type": "error", "msg": {"code": code, "msg": text}}
    if command_id is not None:
        reply = {"id": command_id, **reply}
    return reply


__all__ = [
    "FAKE_USER_UUID",
    "SERVED_CHANNELS",
    "error_reply",
    "fill_message",
    "order_group_message",
    "subscribed_reply",
    "unsubscribed_reply",
    "user_order_message",
]
