"""Telemetry with its intent journal: records the database has are settled and gone by the exit;
records it lacks stay, and the next start writes them; a record that cannot be written is an
error the order path sees, counted."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
from pathlib import Path

import pytest
import trio

from executor.recording.orders.intent_journal import (
    JournalWriteError,
    journal_path,
    read_journal,
    row_record_fields,
)
from executor.recording.rows import OrderRowKind, OrderStatus
from tests.support.rows import order_row, running_telemetry

WAIT_S = 10.0
"""Bound on a wait for the writer (seconds)."""


def statuses(db_path: Path) -> list[tuple[str, str]]:
    """(client_order_id, status) of every order row."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        rows = db.execute("SELECT client_order_id, status FROM orders_fired ORDER BY id").fetchall()
    return rows


async def test_a_settled_intent_leaves_the_journal_empty_at_exit(short_dir: Path) -> None:
    """Intent, pending row, resolution: once committed, the journal holds nothing after close."""
    db_path = short_dir / "t.db"
    pending = order_row(client_order_id="a" * 32)
    resolution = dataclasses.replace(
        pending, kind=OrderRowKind.RESOLUTION, status=OrderStatus.FILLED
    )
    async with running_telemetry(db_path, intent_journal=True) as telemetry:
        telemetry.record_intent(row_record_fields(pending))
        assert read_journal(journal_path(db_path)).rows == [pending]
        telemetry.record_pending(pending)
        await telemetry.record_order(resolution)
        with trio.fail_after(WAIT_S):
            while telemetry.statistics().order_rows_written < 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert telemetry.journal is not None and telemetry.journal.outstanding() == frozenset()
    assert statuses(db_path) == [("a" * 32, "filled")]
    assert journal_path(db_path).stat().st_size == 0


async def test_an_intent_the_database_never_got_is_written_by_the_next_start(
    short_dir: Path,
) -> None:
    """An intent whose rows never reached the channel (the process died first) survives the
    exit in the journal and is the next start's replayed row, counted."""
    db_path = short_dir / "t.db"
    lost = order_row(client_order_id="b" * 32)
    async with running_telemetry(db_path, intent_journal=True) as telemetry:
        telemetry.record_intent(row_record_fields(lost))
    assert statuses(db_path) == []
    assert read_journal(journal_path(db_path)).rows == [lost]
    async with running_telemetry(db_path, intent_journal=True) as telemetry:
        assert telemetry.statistics().journal_replayed == 1
    assert statuses(db_path) == [("b" * 32, "pending")]
    assert journal_path(db_path).stat().st_size == 0


async def test_without_the_journal_nothing_is_recorded(short_dir: Path) -> None:
    """The negative twin: telemetry without an exchange keeps no journal and records no intent."""
    db_path = short_dir / "t.db"
    async with running_telemetry(db_path) as telemetry:
        telemetry.record_intent(row_record_fields(order_row()))
        assert telemetry.journal is None
    assert not journal_path(db_path).exists()


async def test_a_record_that_cannot_be_written_raises_and_is_counted(short_dir: Path) -> None:
    """A journal the kernel refuses: record_intent raises (the order must not go), counted."""
    db_path = short_dir / "t.db"
    async with running_telemetry(db_path, intent_journal=True) as telemetry:
        journal = telemetry.journal
        assert journal is not None
        os.close(journal._descriptor)  # every write now fails (EBADF)
        with pytest.raises(JournalWriteError):
            telemetry.record_intent(row_record_fields(order_row()))
        assert telemetry.statistics().intents_unrecorded == 1
        journal._descriptor = os.open(os.devnull, os.O_WRONLY)  # for the close at exit
