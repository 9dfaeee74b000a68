"""The ``orders_fired`` rows of one order, as the dispatcher writes them (DISPATCH.md §4).

Plain values, no I/O: the ids an order has before its body is built (:class:`PreparedOrder`),
its pending and resolution rows (:func:`order_row`: the request's columns, and the response's
``order_id`` and fill columns stored verbatim, a bare number stringified) and the ``rejected``
row of a fire refused before dispatch (:func:`rejected_order_row`). The intent record is the
pending row itself (``executor.recording.intent_journal``), so what it holds is exactly what the
table would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from executor.clock import wall_ms
from executor.decide.order_request import FireRequest
from executor.exchange.messages import GOOD_TILL_CANCELED, order_payload, verbatim_fill
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus

FILL_COLUMNS: Final = ("fill_count", "remaining_count", "average_fill_price", "average_fee_paid")
"""Response fields stored verbatim in ``orders_fired``."""


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
    kind: OrderRowKind,
    requested_at_ms: int,
    *,
    time_in_force: str,
    self_trade_prevention_type: str,
    status: OrderStatus = OrderStatus.PENDING,
    error_message: str | None = None,
    response: dict[str, Any] | None = None,
    submitted_at_ms: int | None = None,
    acknowledged_at_ms: int | None = None,
) -> OrderRow:
    """A pending row (no response yet) or a resolution (the response's columns verbatim)."""
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
        time_in_force=time_in_force,
        self_trade_prevention_type=self_trade_prevention_type,
        post_only=int(time_in_force == GOOD_TILL_CANCELED),
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


def rejected_order_row(
    request: FireRequest,
    reason: str,
    client_order_id: str,
    *,
    time_in_force: str,
    self_trade_prevention_type: str,
) -> OrderRow:
    """The ``rejected`` row of a real fire refused before dispatch (DISPATCH.md §4 step 8)."""
    template = request.template
    return OrderRow(
        kind=OrderRowKind.REJECTED,
        correlation_id=order_correlation_id(request.correlation_id),
        client_order_id=client_order_id,
        kalshi_order_id=None,
        ticker=template.market_ticker,
        correlation_group=request.correlation_group or None,
        outcome_side=template.outcome,
        count=f"{request.count}.00",
        price_dollars=request.price,
        time_in_force=time_in_force,
        self_trade_prevention_type=self_trade_prevention_type,
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


__all__ = [
    "FILL_COLUMNS",
    "PreparedOrder",
    "order_correlation_id",
    "order_row",
    "rejected_order_row",
]
