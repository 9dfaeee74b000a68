"""Start-up's replay of the intent journal: the rows an earlier run recorded and the database lacks.

An earlier run that was killed may have sent orders whose rows never reached SQLite: the intent
journal (``executor.recording.orders.intent_journal``) has their ``pending`` rows, and perhaps rows
the database refused during an audit outage. Before anything else reads the table (reconciliation,
the risk gate's warm start), :func:`replay_journal` writes, for each order the journal knows (its
latest record):

- the record, when the database has no row for the order (an intent whose pending row died in the
  channel: start-up reconciliation then asks the exchange what became of it, like any ``pending``
  row an earlier run left);
- the record, when it is further along than the database's row by the order ledger's rank
  (``executor.recording.orders.terms``: a higher status, or the same open one with more filled; a
  resolution the database refused, kept during an outage, say a ``filled`` record over a
  committed ``accepted`` row);
- nothing otherwise: the database's row is at least as far along (the usual case: the rows landed
  and the journal had not been compacted yet), so a replay never takes a row back.

So replaying twice writes nothing the second time, and a kill during the replay loses nothing
(the journal is emptied only after the rows are committed, by the caller). Blocking: it runs in
the telemetry worker thread, on the writer's connection, before the consumer starts.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from executor.recording.audit_trail import refused_for_good
from executor.recording.database import TelemetryOpenError
from executor.recording.orders.intent_journal import journal_path, read_journal
from executor.recording.orders.terms import further_along
from executor.recording.rows import (
    OrderRow,
    OrderRowKind,
    OrderStatus,
    TelemetryRow,
    row_fields,
)
from executor.recording.sqlite_writer import write_batch

log = structlog.get_logger()

_ROW_STATE_SQL: Final = (
    "SELECT status, kalshi_order_id, error_message, fill_count, remaining_count"
    " FROM orders_fired WHERE client_order_id = ?"
)


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    """What the replay found and did.

    Attributes:
        records: whole records read (every record of an order counts).
        orders: orders the journal knows.
        replayed: rows written because the database lacked them.
        torn: records skipped (cut short or corrupt).
        refused: rows the database refused for good (a CHECK: logged with the row).
    """

    records: int = 0
    orders: int = 0
    replayed: int = 0
    torn: int = 0
    refused: int = 0


def _needs_writing(connection: sqlite3.Connection, row: OrderRow) -> bool:
    found = connection.execute(_ROW_STATE_SQL, (row.client_order_id,)).fetchone()
    if found is None:
        return True
    status, kalshi_order_id, error_message, fill_count, remaining_count = found
    committed = dataclasses.replace(
        row,
        status=OrderStatus(status),
        kalshi_order_id=kalshi_order_id,
        error_message=error_message,
        fill_count=fill_count,
        remaining_count=remaining_count,
    )
    return further_along(row, committed)


def replay_journal(connection: sqlite3.Connection, db_path: Path) -> ReplayOutcome:
    """Write the rows the journal of ``db_path`` knows and the database lacks (blocking).

    Raises:
        TelemetryOpenError: the journal cannot be read, or the database refused a row for a
            reason that may pass (start-up stops: the journal is kept for the next try).
    """
    path = journal_path(db_path)
    try:
        contents = read_journal(path)
    except OSError as error:
        raise TelemetryOpenError(f"cannot read the intent journal {path}: {error}") from None
    try:
        missing = [
            dataclasses.replace(row, kind=OrderRowKind.RESOLUTION)
            for row in contents.rows
            if _needs_writing(connection, row)
        ]
    except sqlite3.Error as error:
        raise TelemetryOpenError(
            f"cannot compare the intent journal {path} with {db_path}: {error}"
        ) from None
    refused = 0
    if missing:
        outcome = write_batch(connection, list[TelemetryRow](missing))
        for row, failure in outcome.order_failures:
            if not refused_for_good(failure):
                raise TelemetryOpenError(
                    f"cannot write the intent journal's rows to {db_path}: {failure}"
                )
            refused += 1
            log.error(
                "intent journal row refused by the database", row=row_fields(row), error=failure
            )
    result = ReplayOutcome(
        records=contents.records,
        orders=len(contents.rows),
        replayed=len(missing) - refused,
        torn=contents.torn,
        refused=refused,
    )
    if result.records or result.torn:
        log.info("intent journal replayed", path=str(path), **dataclasses.asdict(result))
    if result.torn:
        log.warning("intent journal records skipped: cut short or corrupt", torn=result.torn)
    return result


__all__ = ["ReplayOutcome", "replay_journal"]
