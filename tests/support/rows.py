"""Sample order rows for the tests of the orders table and the writer."""

from __future__ import annotations

import dataclasses
from typing import Any

from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus


def order_row(**changes: Any) -> OrderRow:
    """A valid pending order row, with ``changes`` applied."""
    row = OrderRow(
        kind=OrderRowKind.PENDING,
        correlation_id="corr-1",
        client_order_id="0" * 31 + "1",
        kalshi_order_id=None,
        ticker="KXTEST-25NOV30-B40",
        correlation_group="group-a",
        outcome_side="yes",
        count="3.00",
        price_dollars="0.4200",
        time_in_force="fill_or_kill",
        self_trade_prevention_type="taker_at_cross",
        post_only=0,
        status=OrderStatus.PENDING,
        error_message=None,
        fill_count=None,
        remaining_count=None,
        average_fill_price=None,
        average_fee_paid=None,
        requested_at_ms=1_700_000_000_000,
        submitted_at_ms=None,
        acknowledged_at_ms=None,
    )
    return dataclasses.replace(row, **changes)
