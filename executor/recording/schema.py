"""The telemetry file itself: where it lives by default, and its tables and indexes.

Plain data and one path function, with no SQLite connection and no Trio: ``executor stats``
imports this module to find the file without loading the service, and the writer thread
(``executor.recording.database``) runs these statements when it opens the file. The tables
and columns are the reference system's (TELEMETRY.md, DISPATCH.md §8), so its benchmark query and
its poller can share the file; :data:`EXECUTOR_HEARTBEATS_SCHEMA` is the executor's own, made
only when first written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

REFERENCE_USER_VERSION: Final = 6
"""``user_version`` stamped on a file this process created: the reference's current schema, so its
migrations do not run against a file lacking their tables."""


SCHEMA_STATEMENTS: Final = (
    """CREATE TABLE IF NOT EXISTS correlations (
    correlation_id  TEXT    PRIMARY KEY,
    created_at_ms   INTEGER NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS latency_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    correlation_id  TEXT    NOT NULL REFERENCES correlations (correlation_id),
    stage           TEXT    NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    ended_at_ms     INTEGER NOT NULL,
    duration_ms     REAL    NOT NULL,
    metadata_json   TEXT,
    created_at_ms   INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000)
)""",
    "CREATE INDEX IF NOT EXISTS idx_latency_events_stage ON latency_events (stage)",
    "CREATE INDEX IF NOT EXISTS idx_latency_events_correlation_id"
    " ON latency_events (correlation_id)",
    "CREATE INDEX IF NOT EXISTS idx_latency_events_started_at ON latency_events (started_at_ms)",
    """CREATE TABLE IF NOT EXISTS orders_fired (
    id                          INTEGER PRIMARY KEY AUTOINCREMENT,
    correlation_id              TEXT    NOT NULL,
    client_order_id             TEXT    NOT NULL UNIQUE,
    kalshi_order_id             TEXT,
    ticker                      TEXT    NOT NULL,
    correlation_group           TEXT,
    outcome_side                TEXT    NOT NULL CHECK (outcome_side IN ('yes', 'no')),
    count                       TEXT    NOT NULL CHECK (CAST(count AS REAL) > 0),
    price_dollars               TEXT    NOT NULL
        CHECK (CAST(price_dollars AS REAL) > 0 AND CAST(price_dollars AS REAL) < 1),
    time_in_force               TEXT    NOT NULL
        CHECK (time_in_force IN ('fill_or_kill', 'good_till_canceled', 'immediate_or_cancel')),
    self_trade_prevention_type  TEXT    NOT NULL
        CHECK (self_trade_prevention_type IN ('taker_at_cross', 'maker')),
    post_only                   INTEGER CHECK (post_only IN (0, 1)),
    status                      TEXT    NOT NULL CHECK (status IN (
        'pending', 'submitted', 'accepted', 'rejected', 'filled', 'canceled', 'error'
    )),
    error_message               TEXT,
    fill_count                  TEXT,
    remaining_count             TEXT,
    average_fill_price          TEXT,
    average_fee_paid            TEXT,
    requested_at_ms             INTEGER NOT NULL,
    submitted_at_ms             INTEGER,
    acknowledged_at_ms          INTEGER,
    created_at_ms               INTEGER NOT NULL
        DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000),
    FOREIGN KEY (correlation_id) REFERENCES correlations (correlation_id)
)""",
    "CREATE INDEX IF NOT EXISTS idx_orders_fired_ticker ON orders_fired (ticker)",
    "CREATE INDEX IF NOT EXISTS idx_orders_fired_status ON orders_fired (status)",
    "CREATE INDEX IF NOT EXISTS idx_orders_fired_requested_at ON orders_fired (requested_at_ms)",
    "CREATE INDEX IF NOT EXISTS idx_orders_fired_correlation_id ON orders_fired (correlation_id)",
    """CREATE TABLE IF NOT EXISTS heartbeats (
    process         TEXT    PRIMARY KEY,
    pid             INTEGER NOT NULL,
    started_at_ms   INTEGER NOT NULL,
    beat_at_ms      INTEGER NOT NULL,
    queue_depth     INTEGER NOT NULL,
    dropped_rows    INTEGER NOT NULL
)""",
)
"""Every statement that puts the schema in place, in order; each is idempotent (``IF NOT
EXISTS``), so opening a file the reference or an earlier run created changes nothing in it."""


EXECUTOR_HEARTBEATS_SCHEMA: Final = """CREATE TABLE IF NOT EXISTS executor_heartbeats (
    process          TEXT    PRIMARY KEY,
    pid              INTEGER NOT NULL,
    started_at_ms    INTEGER NOT NULL,
    beat_at_ms       INTEGER NOT NULL,
    lookups_unknown  INTEGER NOT NULL
)"""
"""The executor's own counters, one row per instance, replaced with its ``heartbeats`` row in the
same transaction (the same ``process``, ``pid`` and ``started_at_ms``): what ``executor stats``
shows of a live counter. Not the reference's (its ``heartbeats`` keeps its exact columns; it never
reads this table); made by the writer with the first heartbeat that carries the counters, so a
file written without an exchange has only the reference's tables."""


def default_telemetry_db() -> Path:
    """Where rows go without ``--telemetry-db``: ``$XDG_STATE_HOME/trio-executor/telemetry.db``."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state_home) / "trio-executor" / "telemetry.db"


__all__ = [
    "EXECUTOR_HEARTBEATS_SCHEMA",
    "REFERENCE_USER_VERSION",
    "SCHEMA_STATEMENTS",
    "default_telemetry_db",
]
