"""Which ``orders_fired`` rows start-up reconciliation reads back (``load_open_orders``).

Rows are written by the real writer into a real file, then read back read-only.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from executor.recording.database import close_database, open_database
from executor.recording.orders.open_orders import load_open_orders
from executor.recording.orders.terms import (
    CANCELLED_AT_SHUTDOWN,
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
    is_open,
    startup_cause,
)
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from executor.recording.sqlite_writer import write_batch
from tests.support.rows import order_row

NOW_MS = 1_700_000_000_000


def write(path: Path, rows: list[OrderRow]) -> None:
    """Commit ``rows`` with the telemetry writer."""
    connection, _ = open_database(path)
    try:
        outcome = write_batch(connection, list(rows))
        assert outcome.order_rows_written == len(rows) and not outcome.order_failures
    finally:
        close_database(connection, path)


def row(n: int, status: OrderStatus, **changes: object) -> OrderRow:
    """Row ``n`` (its own client_order_id), resolved with ``status``."""
    return order_row(
        kind=OrderRowKind.RESOLUTION,
        client_order_id=f"{n:032x}",
        status=status,
        requested_at_ms=NOW_MS + n,
        **changes,
    )


def test_unfinished_and_ambiguous_rows_are_read_and_definite_ones_are_not(
    tmp_path: Path,
) -> None:
    """Pending, submitted, accepted, a partly filled resting order, the two ambiguous errors
    and a row the exchange was found not to have (absent is not the last word within the live
    window) come back, oldest first; finished rows, definite errors, rows already reconciled
    and rows outside the window do not."""
    gtc = {"time_in_force": "good_till_canceled"}
    wanted = [
        row(1, OrderStatus.PENDING),
        row(2, OrderStatus.SUBMITTED),
        row(3, OrderStatus.ACCEPTED, remaining_count="3.00", **gtc),
        row(4, OrderStatus.FILLED, fill_count="1.00", remaining_count="2.00", **gtc),
        row(5, OrderStatus.ERROR, error_message=OUTCOME_UNKNOWN_PREFIX + "timed out"),
        row(6, OrderStatus.ERROR, error_message=CANCELLED_AT_SHUTDOWN),
        row(11, OrderStatus.ERROR, error_message=NO_SUCH_ORDER_PREFIX + "timed out"),
    ]
    unwanted = [
        row(7, OrderStatus.FILLED, fill_count="3.00", remaining_count="0.00"),
        row(8, OrderStatus.CANCELED),
        row(9, OrderStatus.REJECTED, error_message="risk gate: cooldown"),
        row(10, OrderStatus.ERROR, error_message="400 invalid_parameters: bad"),
        row(12, OrderStatus.FILLED, error_message=RECONCILED_PREFIX + "timed out"),
        row(13, OrderStatus.FILLED, fill_count="3.00", remaining_count="0.00", **gtc),
        row(
            14,
            OrderStatus.ERROR,
            error_message=OUTCOME_UNKNOWN_PREFIX + "x",
            kalshi_order_id="already-known",
        ),
        dataclasses.replace(row(15, OrderStatus.PENDING), requested_at_ms=NOW_MS - 10),
        row(16, OrderStatus.ERROR, error_message=NO_SUCH_ORDER_PREFIX + "x", kalshi_order_id="k"),
    ]
    path = tmp_path / "t.db"
    write(path, unwanted[3:] + wanted[::-1] + unwanted[:3])
    found = load_open_orders(path, since_ms=NOW_MS)
    assert found == wanted
    # The same rule on one row (what the poll follows), but for the absent row: start-up asks
    # about it again, the poll does not (it was asked until the exchange's data covered it).
    assert [is_open(entry) for entry in wanted] == [True] * 6 + [False]
    assert not any(is_open(entry) for entry in unwanted[:-2])


def test_a_gtc_row_accepted_with_nothing_remaining_is_still_open() -> None:
    """An ``accepted`` row is followed whatever its remaining count says (issue 21 item 2: the
    poll follows every row that is not final, not only those with contracts remaining)."""
    gtc = {"time_in_force": "good_till_canceled"}
    assert is_open(row(1, OrderStatus.ACCEPTED, remaining_count="0.00", **gtc))
    assert not is_open(row(2, OrderStatus.CANCELED, remaining_count="0.00", **gtc))


def test_an_absent_rows_cause_comes_back_without_its_marker() -> None:
    """A row re-read after "no such order" is asked about with its original cause, so a second
    absent verdict writes the same text, not the marker twice."""
    absent = row(1, OrderStatus.ERROR, error_message=NO_SUCH_ORDER_PREFIX + "timed out")
    assert startup_cause(absent) == "timed out"


def test_no_file_or_no_table_is_nothing_to_reconcile(tmp_path: Path) -> None:
    """A database that does not exist, or has no orders table, gives no rows (and is not made)."""
    assert load_open_orders(tmp_path / "missing.db", since_ms=0) == []
    assert not (tmp_path / "missing.db").exists()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert load_open_orders(empty, since_ms=0) == []
