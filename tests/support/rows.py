"""Sample order rows, and a telemetry consumer for one block, for the tests that write them.

Shared by the tests of the orders table and the writer (tests/exchange/test_orders_table.py) and of
the risk gate's warm start (tests/decide/test_risk.py), which each started a consumer in a nursery
and built pending rows the same way.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from executor.telemetry import Telemetry, serve_telemetry


@asynccontextmanager
async def running_telemetry(path: Path, **options: Any) -> AsyncIterator[Telemetry]:
    """A telemetry consumer writing to ``path`` (``options`` go to ``serve_telemetry``).

    The block may close it itself to assert on the drained file inside; otherwise it is closed as
    the block ends, and the exit waits for the consumer to drain and commit.
    """
    async with trio.open_nursery() as nursery:
        telemetry: Telemetry = await nursery.start(
            functools.partial(serve_telemetry, path, **options)
        )
        try:
            yield telemetry
        finally:
            telemetry.close()


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
