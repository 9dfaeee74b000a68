"""The ``orders_fired`` rows of an order (DISPATCH.md §4): its ``pending`` row, its resolution,
a refusal's ``rejected`` row; and the values they are made from (the order flags, the ids).

Pure: builds rows, queues nothing (``executor.exchange.orders.dispatcher`` does).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from executor.clock import wall_ms
from executor.decide.decision import Permission
from executor.decide.order_request import FireRequest
from executor.exchange.messages import order_payload, verbatim_fill
from executor.recording.orders.intent_journal import RecordFields
from executor.recording.orders.terms import GOOD_TILL_CANCELED
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus

FILL_COLUMNS: Final = ("fill_count", "remaining_count", "average_fill_price", "average_fee_paid")
"""Response fields stored verbatim in ``orders_fired``."""


@dataclass(frozen=True, slots=True)
class OrderPolicy:
    """How orders are placed: the configured order flags and where they may go.

    Attributes:
        time_in_force: ``fill_or_kill``, ``good_till_canceled`` or ``immediate_or_cancel``.
        self_trade_prevention_type: ``taker_at_cross`` or ``maker``.
        environment: ``demo`` or ``prod``.
        allow_production: ``KALSHI_ALLOW_PRODUCTION_ORDERS``.
        cancel_order_on_pause: sent with every order (``KALSHI_ORDER_CANCEL_ON_PAUSE``); None
            sends nothing (the §5 body).
        order_group_id: the order group every order goes into; None: none.
    """

    time_in_force: str = "fill_or_kill"
    self_trade_prevention_type: str = "taker_at_cross"
    environment: str = "demo"
    allow_production: bool = False
    cancel_order_on_pause: bool | None = None
    order_group_id: str | None = None

    @property
    def permission(self) -> Permission:
        """The production guard these flags make (the decision layer applies it)."""
        return Permission(self.environment, self.allow_production)


@dataclass(frozen=True, slots=True)
class PreparedOrder:
    """The ids and columns an order has before its body is built."""

    request: FireRequest
    client_order_id: str
    correlation_id: str


def order_correlation_id(wake_correlation_id: str) -> str:
    """The order row's correlation id: the wake's, or a fresh uuid4 hex when the wake's is empty."""
    return wake_correlation_id or uuid.uuid4().hex


def order_row(
    prepared: PreparedOrder,
    policy: OrderPolicy,
    kind: OrderRowKind,
    requested_at_ms: int,
    *,
    status: OrderStatus = OrderStatus.PENDING,
    error_message: str | None = None,
    response: dict[str, Any] | None = None,
    submitted_at_ms: int | None = None,
    acknowledged_at_ms: int | None = None,
) -> OrderRow:
    """A ``pending`` or resolution row of ``prepared`` (the response's fill columns verbatim)."""
    request = prepared.request
    payload = order_payload(response or {})
    fills = [verbatim_fill(payload.get(column)) for column in FILL_COLUMNS]
    order_id = payload.get("order_id")
    return OrderRow(
        kind=kind,
        correlation_id=prepared.correlation_id,
        client_order_id=prepared.client_order_id,
        kalshi_order_id=None if order_id is None else str(order_id),
        ticker=request.template.market_ticker,
        correlation_group=request.correlation_group or None,
        outcome_side=request.template.outcome,
        count=f"{request.count}.00",
        price_dollars=request.price,
        time_in_force=policy.time_in_force,
        self_trade_prevention_type=policy.self_trade_prevention_type,
        post_only=int(policy.time_in_force == GOOD_TILL_CANCELED),
        status=status,
        error_message=error_message,
        fill_count=fills[0],
        remaining_count=fills[1],
        average_fill_price=fills[2],
        average_fee_paid=fills[3],
        requested_at_ms=requested_at_ms,
        submitted_at_ms=submitted_at_ms,
        acknowledged_at_ms=acknowledged_at_ms,
    )


_PENDING_KIND: Final = OrderRowKind.PENDING.value
_PENDING_STATUS: Final = OrderStatus.PENDING.value


def pending_record(
    prepared: PreparedOrder, policy: OrderPolicy, requested_at_ms: int
) -> RecordFields:
    """The intent record's fields of ``prepared``'s ``pending`` row: what
    ``row_record_fields(order_row(prepared, policy, PENDING, requested_at_ms))`` gives, made
    without the row. It is the one thing the order path builds before the first byte that the
    row is also made of; the row itself is built after the write (a frozen row of 21 fields is
    most of the cold cost of ``order_row``, docs/performance/notebook/ 2026-12-02)."""
    request = prepared.request
    template = request.template
    tif = policy.time_in_force
    return (
        _PENDING_KIND,
        prepared.correlation_id,
        prepared.client_order_id,
        None,
        template.market_ticker,
        request.correlation_group or None,
        template.outcome,
        f"{request.count}.00",
        request.price,
        tif,
        policy.self_trade_prevention_type,
        int(tif == GOOD_TILL_CANCELED),
        _PENDING_STATUS,
        None,
        None,
        None,
        None,
        None,
        requested_at_ms,
        None,
        None,
    )


def rejected_row(
    request: FireRequest, policy: OrderPolicy, reason: str, client_order_id: str | None = None
) -> OrderRow:
    """The ``rejected`` row of a real fire refused before dispatch (DISPATCH.md §4 step 8);
    ``client_order_id`` None is a fresh uuid4 hex."""
    template = request.template
    return OrderRow(
        kind=OrderRowKind.REJECTED,
        correlation_id=order_correlation_id(request.correlation_id),
        client_order_id=client_order_id or uuid.uuid4().hex,
        kalshi_order_id=None,
        ticker=template.market_ticker,
        correlation_group=request.correlation_group or None,
        outcome_side=template.outcome,
        count=f"{request.count}.00",
        price_dollars=request.price,
        time_in_force=policy.time_in_force,
        self_trade_prevention_type=policy.self_trade_prevention_type,
        post_only=None,
        status=OrderStatus.REJECTED,
        error_message=reason,
        fill_count=None,
        remaining_count=None,
        average_fill_price=None,
        average_fee_paid=None,
        requested_at_ms=wall_ms(),
        submitted_at_ms=None,
        acknowledged_at_ms=None,
    )
