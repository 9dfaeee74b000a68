"""Every start-up asks the exchange again about the rows earlier runs left unsettled, as far back
as the exchange's live listing reaches: "absent" is not the last word within that window.

The in-process executor with the real order path starts on a database an earlier run left, with
rows sent days ago; the fake exchange lists their orders (placed on its book at those times, its
clock moved for each), as an exchange that once listed them late would.
"""

from __future__ import annotations

from pathlib import Path

import trio

from executor.clock import wall_ms
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.database import close_database, open_database
from executor.recording.orders.open_orders import LIVE_WINDOW_MS
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
)
from executor.recording.rows import OrderRowKind, OrderStatus
from executor.recording.sqlite_writer import write_batch
from tests.exchange.test_adoption import place_at
from tests.service.test_fire_e2e import query, start_trading
from tests.support.orders import TICKER
from tests.support.rows import order_row

DAY_MS = 24 * 3600 * 1000


def leave_rows(db_path: Path, rows: dict[str, tuple[int, str]]) -> None:
    """Commit an earlier run's ``error`` rows: per client_order_id, its send time and message."""
    connection, _ = open_database(db_path)
    try:
        write_batch(
            connection,
            [
                order_row(
                    kind=OrderRowKind.RESOLUTION,
                    correlation_id=f"earlier-{client_order_id[-1]}",
                    client_order_id=client_order_id,
                    ticker=TICKER,
                    status=OrderStatus.ERROR,
                    error_message=message,
                    requested_at_ms=sent_ms,
                    submitted_at_ms=sent_ms,
                )
                for client_order_id, (sent_ms, message) in rows.items()
            ],
        )
    finally:
        close_database(connection, db_path)


async def test_start_up_asks_again_about_absent_and_unknown_rows_within_the_live_window(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A row found absent 2 days ago and one of unknown outcome sent 29 days ago, both now
    listed filled: start-up corrects them before it serves. A row found absent 31 days ago,
    past the live window, is not asked about and stays as it was."""
    now_ms = wall_ms()
    absent_then, unknown_then, too_old = ("a" * 31 + "1", "a" * 31 + "2", "a" * 31 + "3")
    earlier = {
        absent_then: (now_ms - 2 * DAY_MS, NO_SUCH_ORDER_PREFIX + "timed out"),
        unknown_then: (now_ms - 29 * DAY_MS, OUTCOME_UNKNOWN_PREFIX + "timed out"),
        too_old: (now_ms - LIVE_WINDOW_MS - DAY_MS, NO_SUCH_ORDER_PREFIX + "timed out"),
    }
    leave_rows(short_dir / "t.db", earlier)
    for client_order_id, (sent_ms, _) in earlier.items():
        place_at(fake_exchange, sent_ms, client_order_id)

    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    await running.shutdown()
    rows = query(
        running.db_path,
        "SELECT client_order_id, status, fill_count, error_message FROM orders_fired"
        " ORDER BY client_order_id",
    )
    assert rows == [
        (absent_then, "filled", "3.00", RECONCILED_PREFIX + "timed out"),
        (unknown_then, "filled", "3.00", RECONCILED_PREFIX + "timed out"),
        (too_old, "error", None, NO_SUCH_ORDER_PREFIX + "timed out"),
    ]
