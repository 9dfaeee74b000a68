"""Reading the audit tables for ``executor stats``: ``orders_fired`` by status, with its top
errors, what reconciliation and adoption left in it and the fires the exchange's halts refused,
and the ``heartbeats``.

Called by ``executor.stats.queries.build_report`` inside its one read transaction, on the
read-only connection it opened; a table the file lacks is never asked about here.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from executor.exchange.halts import HALT_ROW_PATTERNS
from executor.recording.orders.terms import (
    ADOPTED_MESSAGE,
    CANCELLED_AT_SHUTDOWN,
    NO_SUCH_ORDER_PREFIX,
    OPEN_ROWS_PARAMS,
    OPEN_ROWS_WHERE,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
)

TOP_ERRORS: Final = 5
"""How many of the most frequent ``orders_fired.error_message`` values are shown."""


def read_orders(connection: sqlite3.Connection, since_ms: int | None) -> dict[str, Any]:
    """``orders_fired`` rows by status, and the most frequent error messages."""
    where, params = ("WHERE requested_at_ms >= ?", [since_ms]) if since_ms is not None else ("", [])
    by_status = dict(
        connection.execute(
            f"SELECT status, COUNT(*) FROM orders_fired {where} GROUP BY status ORDER BY status",
            params,
        ).fetchall()
    )
    error_where = f"{where} {'AND' if where else 'WHERE'} error_message IS NOT NULL"
    top = connection.execute(
        f"SELECT error_message, COUNT(*) AS n FROM orders_fired {error_where}"
        " GROUP BY error_message ORDER BY n DESC, error_message LIMIT ?",
        [*params, TOP_ERRORS],
    ).fetchall()
    return {
        "total": sum(by_status.values()),
        "by_status": by_status,
        "top_errors": [{"error_message": message, "count": count} for message, count in top],
        "reconciliation": _read_reconciliation(connection, where, params),
        "exchange_halts": _read_halts(connection, where, params),
    }


def _read_halts(connection: sqlite3.Connection, where: str, params: list[Any]) -> dict[str, Any]:
    """Real fires refused before sending because the exchange had the order group triggered or
    trading paused (``executor.exchange.halts``), and when the last one was (epoch ms, or None).
    """
    prefix = f"{where} {'AND' if where else 'WHERE'}"
    group, paused = HALT_ROW_PATTERNS["refused_order_group"], HALT_ROW_PATTERNS["refused_paused"]
    (by_group, by_pause, last_ms) = connection.execute(
        "SELECT COUNT(*) FILTER (WHERE error_message LIKE ?),"
        " COUNT(*) FILTER (WHERE error_message LIKE ?),"
        " MAX(requested_at_ms) FILTER (WHERE error_message LIKE ? OR error_message LIKE ?)"
        f" FROM orders_fired {prefix} status = 'rejected'",
        [group, paused, group, paused, *params],
    ).fetchone()
    return {
        "refused_order_group": int(by_group),
        "refused_paused": int(by_pause),
        "last_refused_at_ms": last_ms,
    }


def _read_reconciliation(
    connection: sqlite3.Connection, where: str, params: list[Any]
) -> dict[str, int]:
    """Rows the exchange's answer corrected, rows it did not have, rows still unknown, every row
    still open, and rows adopted from it.

    Read from ``error_message``, which reconciliation writes
    (``executor.exchange.follow.reconcile``): the executor's ``reconciled`` / ``reconcile_failed``
    counters over the file's history; ``outcome_unknown`` the error rows still to be settled;
    ``open`` every row the account poll and start-up still ask about (those, pending, submitted,
    accepted, resting partly filled); ``adopted`` the adoption counter's
    (``executor.exchange.follow.adoption``).
    """
    prefix = f"{where} {'AND' if where else 'WHERE'}"
    (reconciled, failed, unknown, adopted) = connection.execute(
        "SELECT COUNT(*) FILTER (WHERE substr(error_message, 1, ?) = ?),"
        " COUNT(*) FILTER (WHERE status = 'error' AND substr(error_message, 1, ?) = ?),"
        " COUNT(*) FILTER (WHERE status = 'error' AND kalshi_order_id IS NULL"
        "   AND (substr(error_message, 1, ?) = ? OR error_message = ?)),"
        " COUNT(*) FILTER (WHERE error_message = ?)"
        f" FROM orders_fired {prefix} error_message IS NOT NULL",
        [
            len(RECONCILED_PREFIX),
            RECONCILED_PREFIX,
            len(NO_SUCH_ORDER_PREFIX),
            NO_SUCH_ORDER_PREFIX,
            len(OUTCOME_UNKNOWN_PREFIX),
            OUTCOME_UNKNOWN_PREFIX,
            CANCELLED_AT_SHUTDOWN,
            ADOPTED_MESSAGE,
            *params,
        ],
    ).fetchone()
    (still_open,) = connection.execute(
        f"SELECT COUNT(*) FROM orders_fired {prefix} {OPEN_ROWS_WHERE}",
        [*params, *OPEN_ROWS_PARAMS],
    ).fetchone()
    return {
        "reconciled": int(reconciled),
        "reconcile_failed": int(failed),
        "outcome_unknown": int(unknown),
        "open": int(still_open),
        "adopted": int(adopted),
    }


_COUNTERS_JOIN: Final = (
    " LEFT JOIN executor_heartbeats AS own ON own.process = beat.process"
    " AND own.pid = beat.pid AND own.started_at_ms = beat.started_at_ms"
)
"""The executor's own counters of the same run as the heartbeat (written with it); another
writer's heartbeat under the same name (the reference's, a later run's) gets none."""


def read_heartbeats(
    connection: sqlite3.Connection, now_ms: int, *, with_counters: bool = False
) -> list[dict[str, Any]]:
    """Every ``heartbeats`` row with its age in seconds, and its run's ``lookups_unknown`` as
    of that beat (None without the executor's ``executor_heartbeats``, or no row of that run).

    ``with_counters``: the file has ``executor_heartbeats``.
    """
    counters, join = ("own.lookups_unknown", _COUNTERS_JOIN) if with_counters else ("NULL", "")
    rows = connection.execute(
        "SELECT beat.process, beat.pid, beat.started_at_ms, beat.beat_at_ms, beat.queue_depth,"
        f" beat.dropped_rows, {counters} FROM heartbeats AS beat{join} ORDER BY beat.process"
    ).fetchall()
    return [
        {
            "process": process,
            "pid": pid,
            "started_at_ms": started_at_ms,
            "beat_at_ms": beat_at_ms,
            "age_s": (now_ms - beat_at_ms) / 1000,
            "queue_depth": queue_depth,
            "dropped_rows": dropped_rows,
            "lookups_unknown": lookups_unknown,
        }
        for process, pid, started_at_ms, beat_at_ms, queue_depth, dropped_rows, lookups_unknown in (
            rows
        )
    ]


__all__ = ["TOP_ERRORS", "read_heartbeats", "read_orders"]
