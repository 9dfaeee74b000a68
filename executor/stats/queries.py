"""Reading a telemetry database for ``executor stats``: read-only, one snapshot, few objects.

The file is opened read-only (``file:PATH?mode=ro``): no write, no schema change, no lock beyond
the moment of each read. In WAL mode readers never block the writer and the writer never blocks
readers, so this is safe while an executor and a poller write the same file. A WAL reader needs
the ``-shm`` index beside the file: SQLite creates it (and an empty ``-wal``) when it is missing and
the folder is writable. In a read-only folder with no ``-wal``/``-shm`` present no writer can be
running (a writer would have created them), so the file is opened ``immutable`` instead.

Latency percentiles use the project's one definition (``executor.stats.percentile``, type 7).
"""

from __future__ import annotations

import itertools
import sqlite3
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from executor.stats.audit_queries import read_heartbeats, read_orders
from executor.stats.percentile import percentile_of_sorted

SCHEMA_ID: Final = "trio-executor.stats/1"
"""The ``--json`` document's ``schema`` value; bumped on any incompatible change."""

BUSY_TIMEOUT_S: Final = 1.0
"""How long a read waits for a lock (seconds). WAL readers rarely wait at all; a stats command
should answer or fail quickly rather than queue behind a checkpoint."""

INDEX_WORTH_FRACTION: Final = 0.2
"""Use an index for a filter only when it keeps at most this fraction of the rows. A guess: an
index walk costs a random read per row against a sequential scan's many rows per page; on a
million-row file, a stage filter keeping every row ran slower through the index than a scan."""

PERCENTILES: Final = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))

MODES: Final = ("unknown", "real", "shadow")
"""Mode names by the code ``_MODE_CODE_SQL`` gives a row."""

# Exact strings first: the executor's wake_recv rows carry exactly these (TELEMETRY.md), and
# skipping the JSON parser for them keeps a million-row scan fast. Codes index MODES.
_MODE_CODE_SQL: Final = """CASE metadata_json
    WHEN '{"dry_run": false}' THEN 1
    WHEN '{"dry_run": true}' THEN 2
    ELSE CASE WHEN json_valid(metadata_json) THEN
        CASE json_extract(metadata_json, '$.dry_run') WHEN 1 THEN 2 WHEN 0 THEN 1 ELSE 0 END
    ELSE 0 END
END"""


class StatsError(Exception):
    """Bad input: the message is the one line printed (a missing file, not SQLite, no tables)."""


@dataclass(frozen=True)
class LatencySummary:
    """One stage's durations (ms), for one mode: ``all``, ``shadow``, ``real`` or ``unknown``."""

    stage: str
    mode: str
    n: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


@dataclass
class Report:
    """Everything ``executor stats`` prints; ``None`` for a table the file does not have."""

    database: str
    generated_at_ms: int
    since_ms: int | None
    stage: str | None
    latency: list[LatencySummary] = field(default_factory=list)
    orders_fired: dict[str, Any] | None = None
    heartbeats: list[dict[str, Any]] | None = None
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    """``(started_at_ms, duration_ms)`` per stage; read only for ``--plot``."""

    def to_json(self) -> dict[str, Any]:
        """The stable machine-readable document (docs/operations/monitoring.md gives its schema)."""
        return {
            "schema": SCHEMA_ID,
            "database": self.database,
            "generated_at_ms": self.generated_at_ms,
            "since_ms": self.since_ms,
            "stage": self.stage,
            "latency": [vars(summary) for summary in self.latency],
            "orders_fired": self.orders_fired,
            "heartbeats": self.heartbeats,
        }


def open_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only, never creating or changing it.

    Raises:
        StatsError: the file is missing, not a file, not SQLite, or cannot be read.
    """
    if not path.exists():
        raise StatsError(f"{path}: no such file")
    if not path.is_file():
        raise StatsError(f"{path}: not a regular file")
    quoted = urllib.parse.quote(str(path.resolve()))
    try:
        return _connect_and_probe(f"file:{quoted}?mode=ro")
    except sqlite3.DatabaseError as error:
        if "not a database" in str(error):
            raise StatsError(f"{path}: not an SQLite database") from None
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        if wal.exists() or shm.exists():
            raise StatsError(f"{path}: cannot read: {error}") from None
    # A read-only folder: SQLite could not create the -shm a WAL reader needs. With no -wal and
    # no -shm no writer is active (it would have made them), so nothing can change under us.
    try:
        return _connect_and_probe(f"file:{quoted}?mode=ro&immutable=1")
    except sqlite3.DatabaseError as error:
        if "not a database" in str(error):
            raise StatsError(f"{path}: not an SQLite database") from None
        raise StatsError(f"{path}: cannot read: {error}") from None


def _connect_and_probe(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        connection.close()
        raise
    return connection


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {
        name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }


def summarise(stage: str, mode: str, durations: list[float]) -> LatencySummary:
    """n, p50, p90, p99 and max of ``durations`` (ms) with the project's percentile.

    Sorts ``durations`` in place (a million values are not copied).
    """
    durations.sort()
    ordered = durations
    values = {name: percentile_of_sorted(ordered, p) for name, p in PERCENTILES}
    return LatencySummary(
        stage=stage,
        mode=mode,
        n=len(ordered),
        p50_ms=values["p50"],
        p90_ms=values["p90"],
        p99_ms=values["p99"],
        max_ms=ordered[-1],
    )


def read_latency(
    connection: sqlite3.Connection, where: _Filter
) -> dict[tuple[str, str], list[float]]:
    """Durations (ms) per ``(stage, mode)``.

    Each row comes back as one small integer (stage index x 3 + mode code) and its duration:
    building a Python string per row for the stage and the mode cost more than the scan itself.
    The stage names come from ``idx_latency_events_stage`` alone (``DISTINCT``).
    """
    stages = [
        stage
        for (stage,) in connection.execute(
            f"SELECT DISTINCT stage FROM latency_events{where.sql}", where.params
        )
    ]
    if not stages:
        return {}
    stage_code = " ".join(f"WHEN ? THEN {index * len(MODES)}" for index in range(len(stages)))
    sql = (
        f"SELECT CASE stage {stage_code} END + {_MODE_CODE_SQL}, duration_ms"
        f" FROM latency_events{where.sql}"
    )
    buckets: list[list[float]] = [[] for _ in range(len(stages) * len(MODES))]
    appenders = [bucket.append for bucket in buckets]
    for code, duration in connection.execute(sql, [*stages, *where.params]):
        appenders[code](duration)
    return {
        (stage, mode): buckets[index * len(MODES) + code]
        for index, stage in enumerate(stages)
        for code, mode in enumerate(MODES)
        if buckets[index * len(MODES) + code]
    }


def read_latency_series(
    connection: sqlite3.Connection, where: _Filter
) -> dict[str, list[tuple[int, float]]]:
    """``(started_at_ms, duration_ms)`` per stage, for the per-minute plot."""
    sql = f"SELECT stage, started_at_ms, duration_ms FROM latency_events{where.sql}"
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row_stage, started_at_ms, duration in connection.execute(sql, where.params):
        series[row_stage].append((int(started_at_ms), float(duration)))
    return series


@dataclass(frozen=True)
class _Filter:
    """The WHERE clause of the latency queries, with the index choice already made."""

    sql: str
    params: list[Any]


def latency_filter(
    connection: sqlite3.Connection, since_ms: int | None, stage: str | None
) -> _Filter:
    """Filter on stage and start time, through their indexes only where an index pays.

    SQLite has no statistics on this file (nobody runs ANALYZE), so it takes an index whenever one
    matches; walking ``idx_latency_events_stage`` to fetch most of the table costs more than a
    plain scan. Counting through the index first is cheap (the index alone answers it), and a
    unary ``+`` tells SQLite not to use the index when the filter keeps much of the table.
    """
    clauses: list[str] = []
    params: list[Any] = []
    total: int | None = None
    for column, operator, value in (("stage", "=", stage), ("started_at_ms", ">=", since_ms)):
        if value is None:
            continue
        if total is None:
            (total,) = connection.execute("SELECT COUNT(*) FROM latency_events").fetchone()
        (kept,) = connection.execute(
            f"SELECT COUNT(*) FROM latency_events WHERE {column} {operator} ?", [value]
        ).fetchone()
        prefix = "" if kept <= total * INDEX_WORTH_FRACTION else "+"
        clauses.append(f"{prefix}{column} {operator} ?")
        params.append(value)
    return _Filter((" WHERE " + " AND ".join(clauses)) if clauses else "", params)


def build_report(
    connection: sqlite3.Connection,
    database: Path,
    *,
    now_ms: int,
    since_ms: int | None = None,
    stage: str | None = None,
    with_series: bool = False,
) -> Report:
    """Read everything the report needs in one read transaction (one consistent snapshot).

    Raises:
        StatsError: the file has no ``latency_events`` table.
    """
    connection.execute("BEGIN")
    try:
        tables = _tables(connection)
        if "latency_events" not in tables:
            raise StatsError(f"{database}: no latency_events table (not a telemetry database)")
        report = Report(str(database), now_ms, since_ms, stage)
        where = latency_filter(connection, since_ms, stage)
        groups = read_latency(connection, where)
        if with_series:
            report.series = read_latency_series(connection, where)
        for stage_name in sorted({key[0] for key in groups}):
            modes = {mode: values for (name, mode), values in groups.items() if name == stage_name}
            per_mode = [summarise(stage_name, mode, modes[mode]) for mode in sorted(modes)]
            # The modes' lists are sorted now: their concatenation sorts in linear time (runs).
            everything = list(itertools.chain.from_iterable(modes.values()))
            report.latency.append(summarise(stage_name, "all", everything))
            if len(modes) > 1 or "unknown" not in modes:
                report.latency.extend(per_mode)
        if "orders_fired" in tables:
            report.orders_fired = read_orders(connection, since_ms)
        if "heartbeats" in tables:
            report.heartbeats = read_heartbeats(
                connection, now_ms, with_counters="executor_heartbeats" in tables
            )
    finally:
        connection.execute("COMMIT")
    return report


__all__ = [
    "SCHEMA_ID",
    "LatencySummary",
    "Report",
    "StatsError",
    "build_report",
    "latency_filter",
    "open_read_only",
    "read_latency",
    "read_latency_series",
    "summarise",
]
