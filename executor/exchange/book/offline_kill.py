"""The exchange half of ``executor killswitch engage --telemetry-db D`` (``kill_command``).

One short-lived client (no order connections opened: this sends no order), the account's rate
limits read first (a dead executor's kill must not itself be refused with a 429), then the
cancels and their rows, then the group's trigger: cancels first, so that each order this
installation knows of ends with the exchange's own answer in its row; the trigger then catches
what the database never heard of.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Final

import trio

from executor.config.settings import Settings
from executor.exchange.book.cancels import CANCELED_BY_PREFIX, CancelReport, cancel_resting
from executor.exchange.book.order_group import OrderGroup
from executor.exchange.follow.reconcile_terms import CollectedRows
from executor.exchange.orders.transport import ExchangeEndpoint, ExchangeError, open_exchange
from executor.exchange.rate_limits import fetch_api_limits
from executor.recording.database import TelemetryOpenError
from executor.recording.orders.groups import latest_order_group
from executor.recording.orders.open_orders import load_open_orders, write_corrections
from executor.recording.orders.terms import rests
from executor.runtime.exit_codes import EXIT_FAILURE, EXIT_OK
from executor.signer import KalshiSigner

BUDGET_S: Final = 60.0
"""Longest the exchange half may take (seconds): a few batches, a lookup and a trigger at a 10 s
budget each, with room; past it the command gives up with one line rather than hang a shell."""

PROG: Final = "executor killswitch"


def _fail(text: str) -> int:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)
    return EXIT_FAILURE


async def engage_on_exchange(
    settings: Settings, signer: KalshiSigner, db_path: Path, reason: str
) -> int:
    """Cancel the database's resting orders, commit their rows, trigger the newest group.

    Returns:
        0 when every cancel and the trigger went through, 1 otherwise (one line on stderr each).
    """
    exchange = settings.exchange
    assert exchange.base_url is not None  # a real exchange always has one
    why = f"kill switch engaged: {reason}"
    try:
        rows = await trio.to_thread.run_sync(load_open_orders, db_path, 0)
        recorded = await trio.to_thread.run_sync(latest_order_group, db_path, exchange.base_url)
    except sqlite3.Error as error:
        return _fail(f"cannot read {db_path}: {error}")
    resting = [row for row in rows if rests(row)]
    endpoint = ExchangeEndpoint(exchange.base_url, exchange.key_id, signer, exchange.ca_file)
    collected = CollectedRows()
    report = CancelReport()
    triggered: bool | None = None
    with trio.move_on_after(BUDGET_S) as budget:
        try:
            async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
                client.use_limits(await fetch_api_limits(client))
                writer = client.rest
                report = await cancel_resting(writer, resting, collected, reason=why)
                if recorded is not None:
                    group = OrderGroup(writer, recorded.order_group_id, recorded.contracts_limit)
                    triggered = await group.trigger(why)
        except (ExchangeError, ValueError) as error:
            return _fail(f"the exchange cannot be reached: {error}")
    if budget.cancelled_caught:
        return _fail(f"the exchange did not finish within {BUDGET_S:g} s")
    status = EXIT_OK
    if collected.rows:
        try:
            outcome = await trio.to_thread.run_sync(write_corrections, db_path, collected.rows)
        except TelemetryOpenError as error:
            status = _fail(f"cancelled on the exchange, but the rows were not written: {error}")
        else:
            if outcome.order_failures:
                status = _fail(f"{len(outcome.order_failures)} cancelled orders' rows not written")
    print(_summary(report, len(resting)), flush=True)
    if recorded is None:
        print(f"exchange: no order group recorded for {exchange.base_url} in {db_path}")
    elif triggered:
        print(f"exchange: order group {recorded.order_group_id} triggered", flush=True)
    else:
        status = _fail(f"order group {recorded.order_group_id} could not be triggered")
    if report.failed:
        status = _fail(f"{report.failed} orders were not cancelled (see the log lines)")
    return status


def _summary(report: CancelReport, resting: int) -> str:
    line = f"exchange: {report.canceled} of {resting} resting orders cancelled"
    if report.unnamed:
        line += f" ({report.unnamed} without an exchange order id, left to the order group)"
    return f"{line}; rows say {CANCELED_BY_PREFIX!r}..."


__all__ = ["BUDGET_S", "engage_on_exchange"]
