"""The orders_fired and heartbeats tables: their schema, and order rows through the writer."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from executor.recording.database import open_database
from executor.recording.rows import HeartbeatRow, OrderRow, OrderRowKind, OrderStatus, wake_recv_row
from executor.telemetry import Telemetry, TelemetryStatistics, serve_telemetry
from tests.support.rows import order_row, running_telemetry

# (name, type, notnull, default, pk), written from DISPATCH.md §8.
ORDERS_FIRED_COLUMNS = [
    ("id", "INTEGER", 0, None, 1),
    ("correlation_id", "TEXT", 1, None, 0),
    ("client_order_id", "TEXT", 1, None, 0),
    ("kalshi_order_id", "TEXT", 0, None, 0),
    ("ticker", "TEXT", 1, None, 0),
    ("correlation_group", "TEXT", 0, None, 0),
    ("outcome_side", "TEXT", 1, None, 0),
    ("count", "TEXT", 1, None, 0),
    ("price_dollars", "TEXT", 1, None, 0),
    ("time_in_force", "TEXT", 1, None, 0),
    ("self_trade_prevention_type", "TEXT", 1, None, 0),
    ("post_only", "INTEGER", 0, None, 0),
    ("status", "TEXT", 1, None, 0),
    ("error_message", "TEXT", 0, None, 0),
    ("fill_count", "TEXT", 0, None, 0),
    ("remaining_count", "TEXT", 0, None, 0),
    ("average_fill_price", "TEXT", 0, None, 0),
    ("average_fee_paid", "TEXT", 0, None, 0),
    ("requested_at_ms", "INTEGER", 1, None, 0),
    ("submitted_at_ms", "INTEGER", 0, None, 0),
    ("acknowledged_at_ms", "INTEGER", 0, None, 0),
    ("created_at_ms", "INTEGER", 1, "CAST(strftime('%s', 'now') AS INTEGER) * 1000", 0),
]

HEARTBEATS_COLUMNS = [
    ("process", "TEXT", 0, None, 1),
    ("pid", "INTEGER", 1, None, 0),
    ("started_at_ms", "INTEGER", 1, None, 0),
    ("beat_at_ms", "INTEGER", 1, None, 0),
    ("queue_depth", "INTEGER", 1, None, 0),
    ("dropped_rows", "INTEGER", 1, None, 0),
]

# Every column an order row writes, in the order they are selected back.
ORDER_COLUMNS = ", ".join(name for name, *_ in ORDERS_FIRED_COLUMNS[1:-1])

VALID_INSERT = {
    "correlation_id": "corr",
    "client_order_id": "a" * 32,
    "ticker": "KXTEST-25NOV30-B40",
    "outcome_side": "yes",
    "count": "3.00",
    "price_dollars": "0.4200",
    "time_in_force": "fill_or_kill",
    "self_trade_prevention_type": "taker_at_cross",
    "post_only": 0,
    "status": "pending",
    "requested_at_ms": 1_700_000_000_000,
}


def resolution_row(**changes: Any) -> OrderRow:
    """The filled resolution of :func:`order_row`'s order, with ``changes`` applied."""
    resolved: dict[str, Any] = {
        "kind": OrderRowKind.RESOLUTION,
        "kalshi_order_id": "kalshi-42",
        "status": OrderStatus.FILLED,
        "fill_count": "3.00",
        "remaining_count": "0.00",
        "average_fill_price": "0.4200",
        "average_fee_paid": "0.0200",
        "requested_at_ms": 1_700_000_000_999,
        "submitted_at_ms": 1_700_000_000_005,
        "acknowledged_at_ms": 1_700_000_000_050,
    }
    return order_row(**{**resolved, **changes})


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """An autocommit connection that is always closed (unclosed ones warn on Python 3.13)."""
    connection = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    try:
        yield connection
    finally:
        connection.close()


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with connect(path) as connection:
        return connection.execute(sql).fetchall()


def orders(path: Path) -> list[tuple[Any, ...]]:
    return query(path, f"SELECT {ORDER_COLUMNS} FROM orders_fired ORDER BY id")


def expected(row: OrderRow, requested_at_ms: int | None = None) -> tuple[Any, ...]:
    """The stored tuple for ``row`` (optionally with another requested_at_ms)."""
    values = dataclasses.astuple(row)[1:]
    stored = tuple(str(value) if isinstance(value, OrderStatus) else value for value in values)
    if requested_at_ms is None:
        return stored
    index = ORDER_COLUMNS.split(", ").index("requested_at_ms")
    return (*stored[:index], requested_at_ms, *stored[index + 1 :])


@pytest.fixture
def schema_db(tmp_path: Path) -> Path:
    """A file with the executor's schema and nothing else."""
    path = tmp_path / "telemetry.db"
    connection, _ = open_database(path)
    connection.close()
    return path


async def write_rows(path: Path, *rows: Any, **options: Any) -> TelemetryStatistics:
    """Queue ``rows`` before the consumer runs (one batch), close, return the counters."""
    async with running_telemetry(path, **options) as telemetry:
        for row in rows:
            if isinstance(row, OrderRow):
                telemetry.record_pending(row)
            elif isinstance(row, HeartbeatRow):
                await telemetry.record_order(row)
            else:
                telemetry.record(row)
        telemetry.close()
    return telemetry.statistics()


# --- schema ---


def test_orders_fired_columns_match_the_spec(schema_db: Path) -> None:
    """orders_fired has §8's columns in order, with their types, NOT NULLs, default and key."""
    columns = [tuple(info[1:]) for info in query(schema_db, "PRAGMA table_info(orders_fired)")]
    assert columns == ORDERS_FIRED_COLUMNS


def test_heartbeats_columns_match_the_spec(schema_db: Path) -> None:
    """heartbeats has process as its key and five NOT NULL integers."""
    columns = [tuple(info[1:]) for info in query(schema_db, "PRAGMA table_info(heartbeats)")]
    assert columns == HEARTBEATS_COLUMNS


def test_orders_fired_indexes_unique_key_and_foreign_key(schema_db: Path) -> None:
    """The four named indexes exist, client_order_id is unique, correlation_id references."""
    indexes = {
        name: unique for _, name, unique, *_ in query(schema_db, "PRAGMA index_list(orders_fired)")
    }
    assert {
        "idx_orders_fired_ticker",
        "idx_orders_fired_status",
        "idx_orders_fired_requested_at",
        "idx_orders_fired_correlation_id",
    } <= set(indexes)
    unique_columns = [
        query(schema_db, f"PRAGMA index_info({name!r})")[0][2]
        for name, unique in indexes.items()
        if unique
    ]
    assert unique_columns == ["client_order_id"]
    index_columns = {
        name: [info[2] for info in query(schema_db, f"PRAGMA index_info({name!r})")]
        for name in indexes
        if name.startswith("idx_")
    }
    assert index_columns == {
        "idx_orders_fired_ticker": ["ticker"],
        "idx_orders_fired_status": ["status"],
        "idx_orders_fired_requested_at": ["requested_at_ms"],
        "idx_orders_fired_correlation_id": ["correlation_id"],
    }
    foreign = query(schema_db, "PRAGMA foreign_key_list(orders_fired)")
    assert [(table, source, target) for _, _, table, source, target, *_ in foreign] == [
        ("correlations", "correlation_id", "correlation_id")
    ]


def _insert(path: Path, values: dict[str, Any]) -> None:
    with connect(path) as connection:
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("INSERT OR IGNORE INTO correlations VALUES ('corr', 0)")
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        connection.execute(
            f"INSERT INTO orders_fired ({columns}) VALUES ({marks})", list(values.values())
        )


def test_a_valid_direct_insert_is_accepted(schema_db: Path) -> None:
    """The baseline row the CHECK cases vary is itself accepted, with defaulted columns."""
    _insert(schema_db, VALID_INSERT)
    ((row_id, created_at_ms),) = query(schema_db, "SELECT id, created_at_ms FROM orders_fired")
    assert row_id == 1
    assert created_at_ms % 1000 == 0 and created_at_ms > 0


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("outcome_side", "maybe"),
        ("count", "0.00"),
        ("count", "-1.00"),
        ("price_dollars", "0.0000"),
        ("price_dollars", "1.0000"),
        ("price_dollars", "-0.5"),
        ("time_in_force", "day"),
        ("self_trade_prevention_type", "none"),
        ("post_only", 2),
        ("status", "open"),
        ("ticker", None),
        ("requested_at_ms", None),
        ("correlation_id", "no-such-parent"),
    ],
)
def test_each_constraint_refuses_a_violating_row(schema_db: Path, column: str, value: Any) -> None:
    """A row breaking one CHECK, NOT NULL or the foreign key is refused by SQLite itself."""
    with pytest.raises(sqlite3.IntegrityError):
        _insert(schema_db, {**VALID_INSERT, column: value})
    assert query(schema_db, "SELECT COUNT(*) FROM orders_fired") == [(0,)]


def test_a_duplicate_client_order_id_is_refused(schema_db: Path) -> None:
    """client_order_id is UNIQUE: a second plain INSERT of the same id fails."""
    _insert(schema_db, VALID_INSERT)
    with pytest.raises(sqlite3.IntegrityError):
        _insert(schema_db, VALID_INSERT)


# --- order rows through the writer ---


async def test_pending_then_resolution_leaves_one_resolved_row(tmp_path: Path) -> None:
    """The resolution replaces the pending row's columns but keeps its requested_at_ms."""
    path = tmp_path / "telemetry.db"
    pending = order_row()
    resolution = resolution_row()
    statistics = await write_rows(path, pending, resolution)

    assert orders(path) == [expected(resolution, requested_at_ms=pending.requested_at_ms)]
    assert statistics.order_rows_written == 2
    assert statistics.order_rows_dropped == 0
    assert query(path, "SELECT correlation_id FROM correlations") == [("corr-1",)]


async def test_pending_and_resolution_in_separate_batches_also_merge(tmp_path: Path) -> None:
    """A resolution arriving in a later transaction upserts the committed pending row."""
    path = tmp_path / "telemetry.db"
    pending = order_row()
    await write_rows(path, pending)
    resolution = resolution_row(status=OrderStatus.ERROR, error_message="cancelled at shutdown")
    await write_rows(path, resolution)

    assert orders(path) == [expected(resolution, requested_at_ms=pending.requested_at_ms)]


async def test_a_resolution_without_its_pending_row_lands_whole(tmp_path: Path) -> None:
    """A resolution whose pending row was dropped is inserted with every column it carries."""
    path = tmp_path / "telemetry.db"
    resolution = resolution_row()
    statistics = await write_rows(path, resolution)

    assert orders(path) == [expected(resolution)]
    assert statistics.order_rows_written == 1


async def test_a_rejected_row_is_stored_as_given_with_nulls(tmp_path: Path) -> None:
    """A rejected row keeps its fixed-point strings, and None (a group of "") is stored NULL."""
    path = tmp_path / "telemetry.db"
    rejected = order_row(
        kind=OrderRowKind.REJECTED,
        correlation_group=None,
        count="1.00",
        price_dollars=f"{0.07:.4f}",
        post_only=None,
        status=OrderStatus.REJECTED,
        error_message="risk gate: 2 dispatches already in flight (max 2)",
    )
    await write_rows(path, rejected)

    assert orders(path) == [expected(rejected)]
    ((group, count, price, kalshi_id, post_only),) = query(
        path,
        "SELECT correlation_group, count, price_dollars, kalshi_order_id, post_only"
        " FROM orders_fired",
    )
    assert (group, count, price, kalshi_id, post_only) == (None, "1.00", "0.0700", None, None)


async def test_a_refused_order_row_is_dropped_counted_logged_and_its_batch_lands(
    tmp_path: Path,
) -> None:
    """A CHECK-violating order row is dropped, counted and logged with its content; the
    latency and order rows sharing its batch are all written."""
    path = tmp_path / "telemetry.db"
    bad = order_row(client_order_id="b" * 32, outcome_side="maybe")
    good = order_row(client_order_id="c" * 32)
    first = wake_recv_row("wake-1", 1, 2, 1000, False)
    last = wake_recv_row("wake-2", 3, 4, 1000, False)
    with structlog.testing.capture_logs() as logs:
        statistics = await write_rows(path, first, bad, good, last)

    assert statistics.order_rows_dropped == 1
    assert statistics.order_rows_written == 1
    assert statistics.rows_written == 2
    assert statistics.dropped_write_failed == 0
    assert orders(path) == [expected(good)]
    assert query(path, "SELECT correlation_id FROM latency_events ORDER BY id") == [
        ("wake-1",),
        ("wake-2",),
    ]
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert len(errors) == 1
    assert errors[0]["row"]["client_order_id"] == "b" * 32
    assert errors[0]["row"]["outcome_side"] == "maybe"
    assert "CHECK" in errors[0]["error"]


async def test_heartbeats_keep_one_row_per_process(tmp_path: Path) -> None:
    """Each beat replaces its process's row; another process gets its own row."""
    path = tmp_path / "telemetry.db"
    statistics = await write_rows(
        path,
        HeartbeatRow("executor", 10, 1000, 2000, 0, 0),
        HeartbeatRow("poller", 11, 1500, 2500, 1, 1),
        HeartbeatRow("executor", 10, 1000, 12000, 3, 4),
    )

    assert query(path, "SELECT * FROM heartbeats ORDER BY process") == [
        ("executor", 10, 1000, 12000, 3, 4),
        ("poller", 11, 1500, 2500, 1, 1),
    ]
    # Heartbeats count in neither family.
    assert (statistics.rows_written, statistics.order_rows_written) == (0, 0)


# --- backpressure on order rows ---


async def test_record_pending_drops_and_counts_when_the_channel_is_full(tmp_path: Path) -> None:
    """With no room, a pending row is dropped, counted and logged at ERROR; it never waits."""
    path = tmp_path / "telemetry.db"
    with structlog.testing.capture_logs() as logs:
        async with running_telemetry(path, capacity=1) as telemetry:
            # The parked consumer takes the first row; the second fills the buffer.
            telemetry.record(wake_recv_row("wake-1", 1, 2, 1000, False))
            telemetry.record_pending(order_row(client_order_id="1" * 32))
            telemetry.record_pending(order_row(client_order_id="2" * 32))
            during = telemetry.statistics()
            telemetry.close()
    final = telemetry.statistics()

    assert during.order_rows_dropped == 1
    assert final.order_rows_written == 1
    assert final.rows_written == 1
    assert [row[1] for row in orders(path)] == ["1" * 32]
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert [entry["row"]["client_order_id"] for entry in errors] == ["2" * 32]


@contextlib.contextmanager
def write_lock(path: Path) -> Iterator[None]:
    """Hold the database's write lock, so the consumer's commit waits in its worker thread."""
    with connect(path) as blocker:
        blocker.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            blocker.execute("ROLLBACK")


PIPELINE_ROWS = 4
"""One-row batches that fill everything between the channel and a stuck writer: one in the writer,
one handed over behind it, one gathered and waiting for a slot (BATCHES_IN_FLIGHT = 2), and one in
the channel, whose capacity is 1."""


async def fill_the_pipeline(telemetry: Telemetry) -> None:
    """Record ``PIPELINE_ROWS`` wakes, letting the consumer take each, until the channel is full."""
    for index in range(PIPELINE_ROWS):
        telemetry.record(wake_recv_row(f"wake-{index}", 1, 2, 1000, False))
        await trio.testing.wait_all_tasks_blocked()
    assert telemetry.statistics().queued == 1


async def test_record_order_waits_for_room_and_lands(tmp_path: Path) -> None:
    """A full channel makes record_order wait, not drop; once the writer drains, the row lands."""
    path = tmp_path / "telemetry.db"
    done = trio.Event()
    resolution = resolution_row()
    async with (
        running_telemetry(path, capacity=1, batch_max_rows=1, linger_s=0) as telemetry,
        trio.open_nursery() as nursery,
    ):

        async def resolve() -> None:
            await telemetry.record_order(resolution, timeout_s=60)
            done.set()

        with write_lock(path):
            await fill_the_pipeline(telemetry)
            nursery.start_soon(resolve)
            await trio.testing.wait_all_tasks_blocked()
            # The writer waits on the lock; the resolution waits for room.
            assert not done.is_set()
            assert telemetry.statistics().queued == 1
        with trio.fail_after(30):
            await done.wait()
        telemetry.close()
    statistics = telemetry.statistics()

    assert statistics.order_rows_dropped == 0
    assert statistics.order_rows_written == 1
    assert statistics.rows_written == PIPELINE_ROWS
    assert orders(path) == [expected(resolution)]


async def test_record_order_gives_up_after_its_timeout_and_counts(tmp_path: Path) -> None:
    """With no room within timeout_s, record_order returns, logs the whole row and counts it."""
    path = tmp_path / "telemetry.db"
    resolution = resolution_row()
    with structlog.testing.capture_logs() as logs:
        async with running_telemetry(path, capacity=1, batch_max_rows=1, linger_s=0) as telemetry:
            with write_lock(path):
                await fill_the_pipeline(telemetry)
                with trio.fail_after(30):
                    await telemetry.record_order(resolution, timeout_s=0.2)
                during = telemetry.statistics()
            telemetry.close()
    final = telemetry.statistics()

    assert during.order_rows_dropped == 1
    assert final.order_rows_written == 0
    assert final.rows_written == PIPELINE_ROWS
    assert orders(path) == []
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert len(errors) == 1
    assert errors[0]["row"] == {
        **dataclasses.asdict(resolution),
        "kind": "resolution",
        "status": "filled",
    }


async def test_record_order_after_close_counts_and_does_not_raise(tmp_path: Path) -> None:
    """A closed channel cannot take an undroppable row: it is counted, and nothing raises."""
    path = tmp_path / "telemetry.db"
    async with running_telemetry(path) as telemetry:
        telemetry.close()
        await telemetry.record_order(resolution_row())
        await telemetry.record_order(HeartbeatRow("executor", 1, 2, 3, 0, 0))

    assert telemetry.statistics().order_rows_dropped == 1
    assert orders(path) == []


async def test_a_cancelled_caller_still_queues_its_resolution(tmp_path: Path) -> None:
    """record_order is shielded: a fire cancelled at shutdown still gets its row queued."""
    path = tmp_path / "telemetry.db"
    resolution = resolution_row(status=OrderStatus.ERROR, error_message="cancelled at shutdown")
    async with running_telemetry(path) as telemetry:
        with trio.CancelScope() as scope:
            scope.cancel()
            await telemetry.record_order(resolution)
        telemetry.close()

    assert orders(path) == [expected(resolution)]


async def test_order_rows_the_drain_deadline_leaves_are_counted_and_logged(tmp_path: Path) -> None:
    """With no time to drain, held order rows count as order_rows_dropped, each logged."""
    path = tmp_path / "telemetry.db"
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            telemetry: Telemetry = await nursery.start(
                functools.partial(serve_telemetry, path, drain_timeout_s=0)
            )
            telemetry.record(wake_recv_row("wake-1", 1, 2, 1000, False))
            telemetry.record_pending(order_row())
            nursery.cancel_scope.cancel()
    statistics = telemetry.statistics()

    assert (statistics.order_rows_dropped, statistics.dropped_write_failed) == (1, 1)
    assert (statistics.order_rows_written, statistics.rows_written) == (0, 0)
    errors = [entry for entry in logs if entry["log_level"] == "error"]
    assert [entry["row"]["client_order_id"] for entry in errors] == [order_row().client_order_id]
