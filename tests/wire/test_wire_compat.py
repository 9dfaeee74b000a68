"""Wire compatibility: an asyncio client shaped like the reference poller drives the real executor.

The reference poller is asyncio code: it opens the socket with ``asyncio.open_unix_connection``,
puts wakes on a bounded ``asyncio.Queue`` (``sent_at_ns`` stamped before the enqueue), and one
sender task takes them off, writes each frame and awaits ``drain()``; a separate task reads the acks
with ``readexactly``. It never waits for an ack before sending the next frame. ``PollerLikeClient``
does the same against an ``executor serve`` subprocess, and the database the executor wrote is then
read with the reference benchmark's own query. pytest-trio's ``trio_mode`` only runs ``async def``
tests under Trio, so these are plain tests that call ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.wire.protocol import (
    PREFIX_BYTES,
    SCHEMA_VERSION,
    WakeAck,
    WakeMessage,
    decode_wake_ack,
    encode_frame,
    parse_frame_length,
)
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters

FRAME_COUNT = 200
"""Frames one run sends: enough to pipeline and batch, few enough to stay fast."""

DRY_RUN_EVERY = 40
"""Every 40th wake is a shadow fire (five of the 200)."""

POLLER_QUEUE_SIZE = 64
"""The bounded wake queue between the producer and the sender; smaller than FRAME_COUNT so the
producer really is held back by a full queue at times."""

RUN_TIMEOUT_S = 30.0
"""Hard limit on one client run; a hang fails the test instead of stalling the suite."""

REFERENCE_BENCH_QUERY = "SELECT duration_ms FROM latency_events WHERE stage = ? ORDER BY id"
"""The reference benchmark's query for one stage's durations, verbatim."""

LEGACY_V1: dict[str, Any] = {
    "schema_version": 1,
    "correlation_id": "legacy-v1",
    "market_ticker": "KXBTCD-T100",
    "asset": "BTC",
    "direction": "yes",
    "kalshi_price": 0.56,
    "model_probability": 0.62,
    "fee": 0.02,
    "edge": 0.06,
    "decision_ts_ms": 1000,
    "sent_at_ms": 1001,
    "sent_at_ns": 1001000000,
}
LEGACY_V2: dict[str, Any] = {
    **LEGACY_V1,
    "schema_version": 2,
    "correlation_id": "legacy-v2",
    "recv_ns": 5000000000,
    "clock_domain": "host-a:1787290000",
    "dry_run": False,
}
LEGACY_V3: dict[str, Any] = {
    **LEGACY_V2,
    "schema_version": 3,
    "correlation_id": "legacy-v3",
    "wire_price_yes_dollars": 0.56,
    "exchange_index": 2,
    "available_size_contracts": 0.0,
    "price_ranges": [[0.0, 1.0, 0.01]],
}
"""PROTOCOL.md's legacy bodies (raw dicts, as an older poller sent them), with distinct ids."""

Wake = WakeMessage | dict[str, Any]


@pytest.fixture
def spawner(short_dir: Path) -> Iterator[Spawner]:
    """A process starter whose leftovers are killed when the test ends, pass or fail."""
    spawner = Spawner(short_dir)
    try:
        yield spawner
    finally:
        spawner.kill_all()


def stamped(wake: Wake) -> Wake:
    """``wake`` with ``sent_at_ns`` stamped now, as the poller does just before enqueueing."""
    now_ns = time.perf_counter_ns()
    if isinstance(wake, WakeMessage):
        return dataclasses.replace(wake, sent_at_ns=now_ns)
    return {**wake, "sent_at_ns": now_ns}


def correlation_id_of(wake: Wake) -> str:
    """The correlation id a wake carries."""
    return wake.correlation_id if isinstance(wake, WakeMessage) else str(wake["correlation_id"])


def is_dry_run(wake: Wake) -> bool:
    """Whether a wake is a shadow fire (a legacy body without the field is not)."""
    return wake.dry_run if isinstance(wake, WakeMessage) else bool(wake.get("dry_run", False))


def mixed_wakes() -> list[Wake]:
    """FRAME_COUNT wakes: v4 messages, a few dry-run ones, and the three legacy dict bodies."""
    wakes: list[Wake] = [
        make_wake(f"wire-{index:03d}", dry_run=index % DRY_RUN_EVERY == 0)
        for index in range(FRAME_COUNT - 3)
    ]
    # Spread the legacy bodies through the stream rather than bunching them at one end.
    wakes.insert(10, LEGACY_V1)
    wakes.insert(100, LEGACY_V2)
    wakes.insert(190, LEGACY_V3)
    assert len(wakes) == FRAME_COUNT
    return wakes


class PollerLikeClient:
    """One connection used the way the reference poller uses it: queued sends, a separate reader."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.queue: asyncio.Queue[Wake | None] = asyncio.Queue(maxsize=POLLER_QUEUE_SIZE)
        self.acks: list[WakeAck] = []
        self.frames_sent = 0

    async def send_from_queue(self) -> None:
        """Take wakes off the queue and write each one, awaiting ``drain()``; stop at None."""
        while (wake := await self.queue.get()) is not None:
            self.writer.write(encode_frame(wake))
            await self.writer.drain()
            self.frames_sent += 1

    async def read_acks(self, count: int) -> None:
        """Read ``count`` acks with exact reads and decode each with the project's codec."""
        for _ in range(count):
            length = parse_frame_length(await self.reader.readexactly(PREFIX_BYTES))
            self.acks.append(decode_wake_ack(await self.reader.readexactly(length)))


async def drive_like_the_poller(socket_path: Path, wakes: list[Wake]) -> list[WakeAck]:
    """Send every wake through a PollerLikeClient and return the acks in arrival order."""
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    client = PollerLikeClient(reader, writer)
    try:
        async with asyncio.timeout(RUN_TIMEOUT_S), asyncio.TaskGroup() as tasks:
            tasks.create_task(client.send_from_queue())
            tasks.create_task(client.read_acks(len(wakes)))
            for wake in wakes:
                await client.queue.put(stamped(wake))
            await client.queue.put(None)
    finally:
        writer.close()
        await writer.wait_closed()
    assert client.frames_sent == len(wakes)
    return client.acks


def test_poller_shaped_asyncio_client_is_served_and_every_row_lands(
    spawner: Spawner, short_dir: Path
) -> None:
    """200 pipelined wakes (v4, dry-run, legacy v1-v3) are acked in order and all land as rows."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    executor = spawner.serve(socket_path, db_path)
    wakes = mixed_wakes()

    acks = asyncio.run(drive_like_the_poller(socket_path, wakes))

    expected_ids = [correlation_id_of(wake) for wake in wakes]
    assert [ack.correlation_id for ack in acks] == expected_ids
    assert {ack.status for ack in acks} == {"accepted"}
    assert {ack.reason for ack in acks} == {None}
    assert {ack.schema_version for ack in acks} == {SCHEMA_VERSION}

    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    server, telemetry = exit_counters(executor.stderr_lines())
    assert server["frames"] == server["accepted"] == FRAME_COUNT
    assert telemetry["rows_written"] == FRAME_COUNT
    # v1 and v2 bodies carry the default wire price 0.0, which a real fire refuses.
    assert server["refused_price"] == 2
    assert server["fired"] == FRAME_COUNT - 2

    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        durations = [row[0] for row in db.execute(REFERENCE_BENCH_QUERY, ("wake_recv",))]
        rows = db.execute(
            "SELECT correlation_id, started_at_ms, ended_at_ms, metadata_json"
            " FROM latency_events ORDER BY id"
        ).fetchall()
    assert len(durations) == FRAME_COUNT
    assert all(isinstance(duration, float) and duration >= 0.0 for duration in durations)
    assert [row[0] for row in rows] == expected_ids
    expected_metadata = [
        '{"dry_run": true}' if is_dry_run(wake) else '{"dry_run": false}' for wake in wakes
    ]
    assert [row[3] for row in rows] == expected_metadata
    assert expected_metadata.count('{"dry_run": true}') == FRAME_COUNT // DRY_RUN_EVERY
    # The ack's received_at_ms and the row's started_at_ms are the same post-read stamp.
    assert [row[1] for row in rows] == [ack.received_at_ms for ack in acks]
    assert all(started <= ended for _, started, ended, _ in rows)


def test_reference_query_finds_no_rows_for_another_stage(spawner: Spawner, short_dir: Path) -> None:
    """The executor writes only wake_recv rows: the reference query for wake_send finds none."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    executor = spawner.serve(socket_path, db_path)
    acks = asyncio.run(drive_like_the_poller(socket_path, [make_wake("only")]))
    assert [ack.status for ack in acks] == ["accepted"]
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        wake_send = db.execute(REFERENCE_BENCH_QUERY, ("wake_send",)).fetchall()
        wake_recv = db.execute(REFERENCE_BENCH_QUERY, ("wake_recv",)).fetchall()
    assert wake_send == []
    assert len(wake_recv) == 1


@pytest.fixture
def created_db(spawner: Spawner, short_dir: Path) -> Path:
    """A telemetry database created by an executor that served one wake and then exited."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    assert not db_path.exists()
    executor = spawner.serve(socket_path, db_path)
    asyncio.run(drive_like_the_poller(socket_path, [make_wake("creator")]))
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    return db_path


def test_created_database_has_user_version_6_and_only_its_four_tables(created_db: Path) -> None:
    """A file the executor created has user_version 6, its four tables and seven indexes
    (TELEMETRY.md's two tables, DISPATCH.md §8's orders_fired and heartbeats)."""
    with contextlib.closing(sqlite3.connect(created_db)) as db:
        (user_version,) = db.execute("PRAGMA user_version").fetchone()
        tables = {
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        indexes = {
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'"
            )
        }
        columns = [row[1] for row in db.execute("PRAGMA table_info(latency_events)")]
    db.close()
    assert user_version == 6
    assert tables == {"correlations", "latency_events", "orders_fired", "heartbeats"}
    assert indexes == {
        "idx_latency_events_stage",
        "idx_latency_events_correlation_id",
        "idx_latency_events_started_at",
        "idx_orders_fired_ticker",
        "idx_orders_fired_status",
        "idx_orders_fired_requested_at",
        "idx_orders_fired_correlation_id",
    }
    assert columns == [
        "id",
        "correlation_id",
        "stage",
        "started_at_ms",
        "ended_at_ms",
        "duration_ms",
        "metadata_json",
        "created_at_ms",
    ]


def test_existing_database_keeps_its_user_version(spawner: Spawner, short_dir: Path) -> None:
    """An existing database file keeps its user_version (the negative twin of the created file)."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        db.execute("PRAGMA user_version = 3")
    executor = spawner.serve(socket_path, db_path)
    asyncio.run(drive_like_the_poller(socket_path, [make_wake("guest")]))
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        (user_version,) = db.execute("PRAGMA user_version").fetchone()
        count = len(db.execute(REFERENCE_BENCH_QUERY, ("wake_recv",)).fetchall())
    assert user_version == 3
    assert count == 1
