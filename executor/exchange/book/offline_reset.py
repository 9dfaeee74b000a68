"""``executor group reset --telemetry-db D``: the order group opened again, from a shell.

When the exchange triggers this installation's order group by itself (more contracts matched in
15 s than its limit), a running executor refuses every real fire until the group is reset
(``executor.exchange.halts``). This resets the newest group the database records for this
exchange (``PUT /portfolio/order_groups/{id}/reset``); a running executor hears the reset on its
stream (``order_group_updates``) and sends again. It works with or without ``--kill-switch``,
and whether or not an executor runs.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Final

import trio

from executor.config.settings import Settings
from executor.exchange.book.order_group import OrderGroup
from executor.exchange.orders.transport import ExchangeEndpoint, ExchangeError, open_exchange
from executor.exchange.rate_limits import fetch_api_limits
from executor.recording.orders.groups import latest_order_group
from executor.runtime.exit_codes import EXIT_FAILURE, EXIT_OK
from executor.signer import KalshiSigner

BUDGET_S: Final = 30.0
"""Longest the reset may take (seconds): the limits read and one write at a 10 s budget each,
with room; past it the command gives up with one line rather than hang a shell."""

PROG: Final = "executor group"
"""The command's name, at the head of its error lines."""


def _fail(text: str) -> int:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)
    return EXIT_FAILURE


async def reset_on_exchange(settings: Settings, signer: KalshiSigner, db_path: Path) -> int:
    """Reset the newest order group ``db_path`` records for this exchange.

    Returns:
        0 when the exchange accepted the reset (one line on stdout), 1 otherwise (one line on
        stderr: no database, no group recorded, the exchange unreachable or refusing).
    """
    exchange = settings.exchange
    assert exchange.base_url is not None  # a real exchange always has one
    if not await trio.to_thread.run_sync(db_path.exists):
        return _fail(f"no database at {db_path}")
    try:
        recorded = await trio.to_thread.run_sync(latest_order_group, db_path, exchange.base_url)
    except sqlite3.Error as error:
        return _fail(f"cannot read {db_path}: {error}")
    if recorded is None:
        return _fail(f"no order group recorded for {exchange.base_url} in {db_path}")
    endpoint = ExchangeEndpoint(exchange.base_url, exchange.key_id, signer, exchange.ca_file)
    reset = False
    with trio.move_on_after(BUDGET_S) as budget:
        try:
            async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
                client.use_limits(await fetch_api_limits(client))
                group = OrderGroup(client.rest, recorded.order_group_id, recorded.contracts_limit)
                reset = await group.reset("executor group reset")
        except (ExchangeError, ValueError) as error:
            return _fail(f"the exchange cannot be reached: {error}")
    if budget.cancelled_caught:
        return _fail(f"the exchange did not answer within {BUDGET_S:g} s")
    if not reset:
        return _fail(f"order group {recorded.order_group_id} could not be reset (see the log line)")
    print(f"exchange: order group {recorded.order_group_id} reset", flush=True)
    return EXIT_OK


__all__ = ["BUDGET_S", "PROG", "reset_on_exchange"]
