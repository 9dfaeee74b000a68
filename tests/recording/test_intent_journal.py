"""The intent journal: records survive as written, a torn record is skipped and counted, settled
records are dropped so the file stays small, and a refused write is an error, never a silent gap."""

from __future__ import annotations

import dataclasses
import os
import stat
import zlib
from pathlib import Path

import pytest

from executor.recording.orders.intent_journal import (
    COMPACT_AT_BYTES,
    IntentJournal,
    JournalWriteError,
    encode_record,
    journal_path,
    read_journal,
)
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from tests.support.rows import order_row


def pending(client_order_id: str = "a" * 32, **overrides: object) -> OrderRow:
    """A pending row of its own order, every column filled where a pending row has one."""
    fields: dict[str, object] = {
        "kind": OrderRowKind.PENDING,
        "status": OrderStatus.PENDING,
        "client_order_id": client_order_id,
        "correlation_group": "grp",
        "post_only": 0,
    }
    fields.update(overrides)
    return order_row(**fields)


def resolved(row: OrderRow) -> OrderRow:
    """The same order's resolution (filled)."""
    return dataclasses.replace(
        row,
        kind=OrderRowKind.RESOLUTION,
        status=OrderStatus.FILLED,
        kalshi_order_id="k-1",
        fill_count="1.00",
        remaining_count="0.00",
        acknowledged_at_ms=row.requested_at_ms + 5,
    )


@pytest.fixture
def path(short_dir: Path) -> Path:
    """Where a database ``t.db`` in the test's directory keeps its journal."""
    return journal_path(short_dir / "t.db")


def test_a_record_reads_back_as_the_row_it_was(path: Path) -> None:
    """Every column of an appended row, None and integers included, reads back unchanged, and the
    journal is named after the database and readable by its owner only."""
    row = pending(kalshi_order_id=None, submitted_at_ms=None)
    journal = IntentJournal.open(path)
    journal.append(row)
    journal.append(resolved(pending("b" * 32)))
    assert path.name == "t.db-intents"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    contents = read_journal(path)
    assert contents.rows == [row, resolved(pending("b" * 32))]
    assert (contents.records, contents.torn) == (2, 0)


def test_the_latest_record_of_an_order_is_the_one_read(path: Path) -> None:
    """An order journaled twice (its intent, then its refused resolution) reads as the later."""
    journal = IntentJournal.open(path)
    journal.append(pending())
    journal.append(resolved(pending()))
    assert read_journal(path).rows == [resolved(pending())]


def test_a_record_cut_short_is_skipped_and_counted(path: Path) -> None:
    """A kill mid-write leaves a last record without its newline: the records before it are
    read, the torn one is counted, nothing raises."""
    journal = IntentJournal.open(path)
    journal.append(pending("a" * 32))
    journal.append(pending("b" * 32))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    contents = read_journal(path)
    assert [row.client_order_id for row in contents.rows] == ["a" * 32]
    assert (contents.records, contents.torn) == (1, 1)


def test_a_corrupt_record_in_the_middle_is_skipped_and_the_rest_read(path: Path) -> None:
    """A record whose bytes changed fails its checksum: skipped and counted; the ones after it
    are still read (and a checksum that matches is not miscounted: the negative twin)."""
    rows = [pending(letter * 32) for letter in "abc"]
    path.write_bytes(b"".join(encode_record(row) for row in rows))
    assert read_journal(path).torn == 0
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"bbbb", b"bbbc", 1)
    path.write_bytes(b"\n".join(lines))
    contents = read_journal(path)
    assert [row.client_order_id for row in contents.rows] == ["a" * 32, "c" * 32]
    assert contents.torn == 1


def test_garbage_lines_are_counted_not_raised(path: Path) -> None:
    """Zeroes (a power cut's tail), text that is not a record, and a record of the wrong shape
    are each one torn record."""
    good = encode_record(pending())
    payload = b'["pending"]'
    wrong_shape = b"%08x %b\n" % (zlib.crc32(payload), payload)
    path.write_bytes(good + b"\x00" * 30 + b"\n" + b"hello\n" + wrong_shape)
    contents = read_journal(path)
    assert contents.rows == [pending()]
    assert contents.torn == 3


def test_a_missing_journal_is_empty(path: Path) -> None:
    """No file: no rows, nothing torn (a first start)."""
    assert read_journal(path) == read_journal(path.with_name("none"))
    assert read_journal(path).rows == [] and read_journal(path).torn == 0


def test_a_committed_row_settles_its_record_by_the_rules(path: Path) -> None:
    """A committed pending row settles a pending record but not a resolution record; a committed
    resolution settles either."""
    journal = IntentJournal.open(path)
    journal.append(pending("a" * 32))
    journal.append(resolved(pending("b" * 32)))
    journal.settle([pending("a" * 32), pending("b" * 32)])
    assert journal.outstanding() == {"b" * 32}
    journal.settle([resolved(pending("b" * 32))])
    assert journal.outstanding() == frozenset()


def test_settled_records_are_compacted_away_and_outstanding_ones_kept(path: Path) -> None:
    """Past the threshold the file is cut back: to nothing when every record is settled, to the
    outstanding records alone otherwise, so it cannot grow without bound; what is kept still
    reads back."""
    journal = IntentJournal.open(path)
    keeper = pending("f" * 32)
    journal.append(keeper)
    written = 0
    index = 0
    while written < 3 * COMPACT_AT_BYTES:
        row = pending(f"{index:032x}")
        journal.append(row)
        journal.settle([row])
        written += len(encode_record(row))
        index += 1
    assert journal.compactions >= 2
    assert path.stat().st_size < COMPACT_AT_BYTES
    assert read_journal(path).rows[0] == keeper
    journal.settle([keeper])
    journal.close()
    assert path.stat().st_size == 0


def test_without_settling_nothing_is_dropped(path: Path) -> None:
    """The negative twin: unsettled records all survive compaction."""
    journal = IntentJournal.open(path)
    rows = [pending(f"{index:032x}") for index in range(300)]
    for row in rows:
        journal.append(row)
    journal.close()
    assert read_journal(path).rows == rows


def test_a_refused_write_is_an_error(path: Path) -> None:
    """A write the file system refuses raises JournalWriteError and records nothing as
    outstanding (the order must not be sent)."""
    journal = IntentJournal.open(path)
    os.close(journal._descriptor)  # the kernel now refuses every write (EBADF)
    with pytest.raises(JournalWriteError):
        journal.append(pending())
    assert journal.outstanding() == frozenset()
    journal._descriptor = -1  # closed above


def test_a_short_write_is_cut_back_and_the_next_record_reads_back_whole(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write the disk takes only half of raises and is cut back to the last whole record, so
    the next record starts on its own line and reads back whole (no torn pair, nothing torn)."""
    journal = IntentJournal.open(path)
    first, cut, last = pending("a" * 32), pending("b" * 32), pending("c" * 32)
    journal.append(first)
    real_write = os.write

    def half_write(descriptor: int, data: bytes) -> int:
        return real_write(descriptor, data[: len(data) // 2])

    monkeypatch.setattr(os, "write", half_write)
    with pytest.raises(JournalWriteError, match="short write"):
        journal.append(cut)
    monkeypatch.setattr(os, "write", real_write)
    journal.append(last)
    os.close(journal._descriptor)  # as a kill leaves it
    contents = read_journal(path)
    assert (contents.rows, contents.torn) == ([first, last], 0)
    assert journal.outstanding() == {"a" * 32, "c" * 32}
