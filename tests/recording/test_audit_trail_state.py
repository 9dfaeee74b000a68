"""The audit trail's state: which batch outcomes halt real fires and which let them resume."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from structlog.testing import capture_logs

from executor.recording.consumer import TelemetryConsumer
from executor.recording.counters import TelemetryCounters
from executor.recording.rows import HeartbeatRow, TelemetryRow
from executor.recording.sqlite_writer import BatchOutcome
from tests.support.rows import order_row

HEARTBEAT = HeartbeatRow(
    process="executor", pid=1, started_at_ms=1, beat_at_ms=2, queue_depth=0, dropped_rows=0
)


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    """An in-memory database the consumer is given and never uses."""
    db = sqlite3.connect(":memory:")
    yield db
    db.close()


def make_consumer(counters: TelemetryCounters, db: sqlite3.Connection) -> TelemetryConsumer:
    """A consumer whose only use here is judging outcomes (no row is received or written)."""
    _send, receive = trio.open_memory_channel[TelemetryRow](1)
    return TelemetryConsumer(receive, db, Path("t.db"), counters, 10, trio.CapacityLimiter(1))


def test_order_or_heartbeat_failures_with_nothing_written_halt_and_a_write_resumes(
    connection: sqlite3.Connection,
) -> None:
    """A batch whose order and heartbeat rows all failed makes the trail unavailable (one
    outage, one ERROR line); latency rows written meanwhile change nothing; a batch that writes
    a heartbeat makes it available again (one warning)."""
    counters = TelemetryCounters()
    judge = make_consumer(counters, connection)
    with capture_logs() as logs:
        judge._judge_audit_trail(
            BatchOutcome(0, False, order_failures=[(order_row(), "disk is full")])
        )
        assert (counters.audit_available, counters.audit_outages) == (False, 1)
        judge._judge_audit_trail(BatchOutcome(5, True))  # latency rows only
        judge._judge_audit_trail(
            BatchOutcome(0, False, heartbeat_failures=[(HEARTBEAT, "disk is full")])
        )
        assert (counters.audit_available, counters.audit_outages) == (False, 1)
        judge._judge_audit_trail(BatchOutcome(0, True, heartbeat_rows_written=1))
    assert counters.audit_available
    assert [(entry["log_level"], entry["event"].split(":")[0]) for entry in logs] == [
        ("error", "audit trail unavailable"),
        ("warning", "audit trail available again"),
    ]
    assert logs[0]["error"] == "disk is full"
    assert counters.snapshot(0).audit_unavailable == 0


def test_one_bad_row_among_written_ones_does_not_halt(connection: sqlite3.Connection) -> None:
    """An order row refused (a CHECK) in a batch that wrote another order row is a bad row, not
    a lost audit trail: real fires go on."""
    counters = TelemetryCounters()
    make_consumer(counters, connection)._judge_audit_trail(
        BatchOutcome(
            0, False, order_rows_written=1, order_failures=[(order_row(), "CHECK constraint")]
        )
    )
    assert (counters.audit_available, counters.audit_outages) == (True, 0)
