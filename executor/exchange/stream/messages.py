"""The exchange's WebSocket stream, without I/O: the subscribe command and the messages read.

Kalshi's WebSocket API v2 (``tests/published/kalshi-openapi/asyncapi.yaml``): after a handshake
signed like a REST request (``GET /trade-api/ws/v2``), the client subscribes to channels and the
server sends one JSON object per message. This executor subscribes to ``fill`` (each execution
of one of its orders), ``user_orders`` (an order's totals whenever it is created, filled or
cancelled) and ``order_group_updates`` (an order group created, triggered, reset, deleted: the
exchange's trigger of our group is a halt, ``executor.exchange.halts``). ``market_positions``
is not asked for: a fill already says what the position became, and the risk gate's positions
are the account poll's (DISPATCH.md §7) plus the fills it is told of, which the first two
channels keep current.

:func:`parse_stream_message` reads one message into a plain value: :class:`StreamFill`,
:class:`StreamOrder` (the order as ``GET /portfolio/orders`` would show it, through the same
:func:`~executor.exchange.follow.lookup.parse_exchange_order`), :class:`StreamGroupEvent`,
:class:`Subscribed`, :class:`StreamRefusal` (an ``error`` reply) or :class:`OtherMessage`; a
message it cannot read raises :class:`StreamMessageError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeAlias

import orjson

from executor.exchange.follow.lookup import ExchangeOrder, parse_exchange_order
from executor.exchange.messages import ExchangeError

STREAM_PATH: Final = "/trade-api/ws/v2"
"""The WebSocket API's path (signed as ``GET`` at the handshake)."""

STREAM_CHANNELS: Final = ("fill", "user_orders", "order_group_updates")
"""The channels subscribed to (see the module docstring for ``market_positions``)."""


class StreamMessageError(ValueError):
    """A message that is not what the published API says (the text says what is wrong)."""


@dataclass(frozen=True, slots=True)
class StreamFill:
    """One execution of one of our orders (a ``fill`` message).

    Attributes:
        trade_id: the fill's id. order_id: the exchange's order id.
        client_order_id: ours, when the message carries it.
        ticker: the market. contracts: filled now. yes_price: the fill's YES price (dollars).
        fee: the fee of this fill (dollars). is_taker: whether our order took liquidity (as
            it arrived) or rested and was taken (a maker fill).
        ts_ms: the matching engine's time of the fill (Unix ms, the exchange's clock).
    """

    trade_id: str
    order_id: str
    client_order_id: str | None
    ticker: str
    contracts: Decimal
    yes_price: Decimal
    fee: Decimal
    is_taker: bool
    ts_ms: int


@dataclass(frozen=True, slots=True)
class StreamOrder:
    """One of our orders as it now stands (a ``user_order`` message).

    Attributes:
        order: the order in ``orders_fired`` terms (totals, not the change).
        ts_ms: when it last changed (``last_updated_ts_ms``, else ``created_ts_ms``; the
            exchange's clock).
    """

    order: ExchangeOrder
    ts_ms: int


@dataclass(frozen=True, slots=True)
class StreamGroupEvent:
    """An ``order_group_updates`` message: ``event_type`` (``created``, ``triggered``, ``reset``,
    ``deleted``, ``limit_updated``) happened to ``order_group_id`` at ``ts_ms`` (the exchange's
    clock)."""

    event_type: str
    order_group_id: str
    ts_ms: int


@dataclass(frozen=True, slots=True)
class Subscribed:
    """A ``subscribed`` reply: ``channel`` is now subscription ``sid``."""

    channel: str
    sid: int


@dataclass(frozen=True, slots=True)
class StreamRefusal:
    """An ``error`` reply: the published code and text."""

    code: int
    text: str


@dataclass(frozen=True, slots=True)
class OtherMessage:
    """A message of a type this executor does not act on (counted, not read)."""

    type: str


StreamMessage: TypeAlias = (
    StreamFill | StreamOrder | StreamGroupEvent | Subscribed | StreamRefusal | OtherMessage
)


def subscribe_command(command_id: int, channels: tuple[str, ...] = STREAM_CHANNELS) -> str:
    """The ``subscribe`` command for ``channels`` (every market), as the text frame to send."""
    return orjson.dumps(
        {"id": command_id, "cmd": "subscribe", "params": {"channels": list(channels)}}
    ).decode()


def _field(msg: dict[str, Any], name: str, kind: type) -> Any:
    value = msg.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StreamMessageError(f"{name} is not a {kind.__name__}: {value!r:.100}")
    return value


def _decimal(msg: dict[str, Any], name: str) -> Decimal:
    text = _field(msg, name, str)
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise StreamMessageError(f"{name} is not a number: {text!r:.100}") from None
    if not number.is_finite():
        raise StreamMessageError(f"{name} is not finite: {text!r:.100}")
    return number


def _fill(msg: dict[str, Any]) -> StreamFill:
    client_order_id = msg.get("client_order_id")
    return StreamFill(
        trade_id=_field(msg, "trade_id", str),
        order_id=_field(msg, "order_id", str),
        client_order_id=client_order_id if isinstance(client_order_id, str) else None,
        ticker=_field(msg, "market_ticker", str),
        contracts=_decimal(msg, "count_fp"),
        yes_price=_decimal(msg, "yes_price_dollars"),
        fee=_decimal(msg, "fee_cost"),
        is_taker=_field(msg, "is_taker", bool),
        ts_ms=_field(msg, "ts_ms", int),
    )


def _order(msg: dict[str, Any]) -> StreamOrder:
    try:
        order = parse_exchange_order(msg)
    except ExchangeError as error:
        raise StreamMessageError(str(error).replace("orders response", "user_order")) from None
    updated = msg.get("last_updated_ts_ms")
    ts_ms = updated if isinstance(updated, int) else _field(msg, "created_ts_ms", int)
    return StreamOrder(order, ts_ms)


def parse_stream_message(text: str | bytes) -> StreamMessage:
    """One message from the exchange, as a plain value (see the module docstring).

    Raises:
        StreamMessageError: not JSON, not an object, or a ``fill`` / ``user_order`` /
            ``order_group_updates`` / ``subscribed`` / ``error`` message without a field this
            executor reads.
    """
    try:
        payload = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise StreamMessageError(f"not JSON: {text!r:.100}") from None
    if not isinstance(payload, dict):
        raise StreamMessageError(f"not a JSON object: {text!r:.100}")
    kind = payload.get("type")
    msg = payload.get("msg")
    if kind not in ("fill", "user_order", "order_group_updates", "subscribed", "error"):
        return OtherMessage(str(kind))
    if not isinstance(msg, dict):
        raise StreamMessageError(f"{kind} message without a msg object: {text!r:.100}")
    if kind == "fill":
        return _fill(msg)
    if kind == "user_order":
        return _order(msg)
    if kind == "order_group_updates":
        return StreamGroupEvent(
            _field(msg, "event_type", str),
            _field(msg, "order_group_id", str),
            _field(msg, "ts_ms", int),
        )
    if kind == "subscribed":
        return Subscribed(_field(msg, "channel", str), _field(msg, "sid", int))
    return StreamRefusal(_field(msg, "code", int), str(msg.get("msg", "")))


__all__ = [
    "STREAM_CHANNELS",
    "STREAM_PATH",
    "OtherMessage",
    "StreamFill",
    "StreamGroupEvent",
    "StreamMessage",
    "StreamMessageError",
    "StreamOrder",
    "StreamRefusal",
    "Subscribed",
    "parse_stream_message",
    "subscribe_command",
]
