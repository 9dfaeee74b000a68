"""The audit trail's state: which batch outcomes halt real fires and which let them resume, who
is told, and which refused rows are owed rather than dropped."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from executor.recording.audit_trail import AuditTrailState, AuditTransition
from executor.recording.counting.counters import TelemetryCounters
from executor.recording.orders.intent_journal import IntentJournal, read_journal
from executor.recording.rows import HeartbeatRow, OrderRowKind, OrderStatus
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
        judge.account(BatchOutcome(0, False, order_failures=[(order_row(), "disk is full")]))
        assert (counters.audit_available, counters.audit_outages) == (False, 1)
        judge.account(BatchOutcome(5, True))  # latency rows only
        judge.account(BatchOutcome(0, False, heartbeat_failures=[(HEARTBEAT, "disk is full")]))
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


DISK_FULL = "OperationalError: database or disk is full"
CHECK_FAILED = "IntegrityError: CHECK constraint failed: count"


def test_a_row_refused_by_a_full_disk_is_owed_journaled_once_and_handed_back(
    short_dir: Path,
) -> None:
    """A refusal that may pass keeps the row: journaled (once, however often it is refused
    again), counted kept, not dropped, and handed back for the next batch until written."""
    counters = TelemetryCounters()
    journal = IntentJournal.open(short_dir / "j")
    trail = AuditTrailState(counters, Path("t.db"), journal)
    row = order_row(kind=OrderRowKind.RESOLUTION, status=OrderStatus.FILLED)
    assert trail.account(BatchOutcome(0, False, order_failures=[(row, DISK_FULL)])) == []
    assert trail.owed == 1 and journal.appended == 1
    assert trail.take_owed() == [row] and trail.owed == 0
    trail.account(BatchOutcome(0, False, order_failures=[(row, DISK_FULL)]))
    assert (trail.owed, journal.appended) == (1, 1)
    assert read_journal(short_dir / "j").rows == [row]
    trail.account(
        BatchOutcome(0, True, order_rows_written=1, order_rows_committed=trail.take_owed())
    )
    assert (trail.owed, counters.order_rows_kept, counters.order_rows_dropped) == (0, 1, 0)
    assert journal.outstanding() == frozenset()


def test_a_row_refused_by_a_constraint_is_dropped_not_owed() -> None:
    """The negative twin: a CHECK failure is a bug upstream: returned to be logged, counted as
    dropped, never retried."""
    counters = TelemetryCounters()
    trail = make_trail(counters)
    row = order_row()
    dropped = trail.account(
        BatchOutcome(0, False, order_rows_written=1, order_failures=[(row, CHECK_FAILED)])
    )
    assert dropped == [(row, CHECK_FAILED)]
    assert (trail.owed, counters.order_rows_dropped, counters.order_rows_kept) == (0, 1, 0)


def test_an_owed_row_overtaken_by_a_later_row_of_its_order_is_no_longer_owed() -> None:
    """A batch handed to the writer before the refusal was known commits the order's later row:
    the owed (older) row must not be written over it."""
    trail = make_trail(TelemetryCounters())
    early = order_row(kind=OrderRowKind.RESOLUTION, status=OrderStatus.ERROR)
    later = order_row(kind=OrderRowKind.RESOLUTION, status=OrderStatus.FILLED)
    trail.account(BatchOutcome(0, False, order_failures=[(early, DISK_FULL)]))
    trail.account(BatchOutcome(0, True, order_rows_written=1, order_rows_committed=[later]))
    assert trail.take_owed() == []


def test_a_refused_pending_row_whose_resolution_landed_in_its_batch_is_not_owed() -> None:
    """In one batch: the pending row refused, its resolution written: nothing is owed (the
    resolution carries the whole row); the resolution refused and the pending written: owed."""
    trail = make_trail(TelemetryCounters())
    pending = order_row()
    resolution = order_row(kind=OrderRowKind.RESOLUTION, status=OrderStatus.FILLED)
    trail.account(
        BatchOutcome(
            0,
            False,
            order_rows_written=1,
            order_failures=[(pending, DISK_FULL)],
            order_rows_committed=[resolution],
        )
    )
    assert trail.owed == 0
    trail.account(
        BatchOutcome(
            0,
            False,
            order_rows_written=1,
            order_failures=[(resolution, DISK_FULL)],
            order_rows_committed=[pending],
        )
    )
    assert trail.take_owed() == [resolution]


def test_listeners_hear_each_transition_once() -> None:
    """A listener attached to the trail is told when it goes down (with the error) and when it
    comes back, and not for batches that change nothing."""
    trail = make_trail(TelemetryCounters())
    heard: list[AuditTransition] = []
    trail.on_change(heard.append)
    trail.account(BatchOutcome(0, False, heartbeat_failures=[(HEARTBEAT, DISK_FULL)]))
    trail.account(BatchOutcome(0, False, heartbeat_failures=[(HEARTBEAT, DISK_FULL)]))
    trail.account(BatchOutcome(3, True))
    trail.account(BatchOutcome(0, True, heartbeat_rows_written=1))
    trail.account(BatchOutcome(0, True, heartbeat_rows_written=1))
    assert heard == [AuditTransition(False, DISK_FULL, 1), AuditTransition(True, None, 1)]
