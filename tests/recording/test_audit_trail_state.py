"""The audit trail's state: which batch outcomes halt real fires and which let them resume."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from executor.recording.audit_trail import AuditTrailState
from executor.recording.counters import TelemetryCounters
from executor.recording.rows import HeartbeatRow
from executor.recording.sqlite_writer import BatchOutcome
from tests.support.rows import order_row

HEARTBEAT = HeartbeatRow(
    process="executor", pid=1, started_at_ms=1, beat_at_ms=2, queue_depth=0, dropped_rows=0
)


def make_trail(counters: TelemetryCounters) -> AuditTrailState:
    """The trail's state over ``counters``, without a journal (no row is written here)."""
    return AuditTrailState(counters, Path("t.db"))


def test_order_or_heartbeat_failures_with_nothing_written_halt_and_a_write_resumes() -> None:
    """A batch whose order and heartbeat rows all failed makes the trail unavailable (one
    outage, one ERROR line); latency rows written meanwhile change nothing; a batch that writes
    a heartbeat makes it available again (one warning)."""
    counters = TelemetryCounters()
    judge = make_trail(counters)
    with capture_logs() as logs:
        judge.account(
            BatchOutcome(0, False, order_failures=[(order_row(), "disk is full")])
        )
        assert (counters.audit_available, counters.audit_outages) == (False, 1)
        judge.account(BatchOutcome(5, True))  # latency rows only
        judge.account(
            BatchOutcome(0, False, heartbeat_failures=[(HEARTBEAT, "disk is full")])
        )
        assert (counters.audit_available, counters.audit_outages) == (False, 1)
        judge.account(BatchOutcome(0, True, heartbeat_rows_written=1))
    assert counters.audit_available
    assert [(entry["log_level"], entry["event"].split(":")[0]) for entry in logs] == [
        ("error", "audit trail unavailable"),
        ("warning", "audit trail available again"),
    ]
    assert logs[0]["error"] == "disk is full"
    assert counters.snapshot(0).audit_unavailable == 0


def test_one_bad_row_among_written_ones_does_not_halt() -> None:
    """An order row refused (a CHECK) in a batch that wrote another order row is a bad row, not
    a lost audit trail: real fires go on."""
    counters = TelemetryCounters()
    make_trail(counters).account(
        BatchOutcome(
            0, False, order_rows_written=1, order_failures=[(order_row(), "CHECK constraint")]
        )
    )
    assert (counters.audit_available, counters.audit_outages) == (True, 0)
