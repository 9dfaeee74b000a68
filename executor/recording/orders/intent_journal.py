"""The intent journal: an append-only file beside the database that a SIGKILL cannot empty.

The audit trail's rows reach SQLite through a channel and a writer thread, so the last ~10 ms of
them live only in this process's memory (the consumer's linger, the batch being written). An
order sent in that window and then killed would have no row at all (issue 21, item 1). So, before
a real order's first byte leaves, its ``pending`` row (everything needed to find the order again
and to write a faithful row: client_order_id, ticker, side, count, price, the time it was
requested, the correlation ids) is appended to this file with **one** ``os.write``; the kernel
holds it from then on, whatever happens to the process. Rows the database refuses during an
audit outage (item 4) are appended the same way (:meth:`IntentJournal.keep`), so they survive a
kill while they wait for the trail to come back.

The file is ``DB-intents`` (:func:`journal_path`), mode 0600, one record a line::

    <crc32 of the JSON, 8 hex digits> <JSON array: the row's kind and its 20 columns>\\n

A record that does not end in a newline, whose checksum does not match, or that does not parse
(killed mid-write, a power cut's zero-filled tail) is *torn*: :func:`read_journal` skips it and
counts it, never raises.

What is durable: a record survives the process (it is in the page cache once ``os.write``
returns); it is **not** fsynced, so a power cut or a kernel crash may lose the records written
since the kernel last wrote the file back (docs/design/durability.md, "What survives a crash").

Growth is bounded: the journal remembers which of its records the database does not have yet
(``outstanding``, the latest record per ``client_order_id``); once a row of that order is
committed (:meth:`IntentJournal.settle`) the record is no longer needed, and when the file passes
``COMPACT_AT_BYTES`` it is truncated (nothing outstanding) or rewritten with the outstanding
records alone (written beside it, then renamed over it: a kill in between leaves the old file
whole). Start-up replays what an earlier run left (``executor.recording.orders.journal_replay``) and
then starts the file empty.

Every call here is a system call on a local file, made on the Trio thread: an append is one
``os.write`` of a few hundred bytes (the cost issue 21 budgets, measured in
docs/performance/notebook/); compaction is rare (once per ~200 orders) and touches only the
outstanding records.
"""

from __future__ import annotations

import contextlib
import errno
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson
import structlog

from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus, order_values

log = structlog.get_logger()

JOURNAL_SUFFIX: Final = "-intents"
"""The journal's name is the database's plus this (beside ``-wal`` and ``-shm``)."""

COMPACT_AT_BYTES: Final = 64 * 1024
"""The file is compacted once it is this large (bytes): about 200 records of ~330 bytes, so a
compaction is rare, and a start-up replay reads at most a few hundred lines."""

JOURNAL_MODE: Final = 0o600
"""The journal holds what the executor trades: readable by its owner only, like the socket."""

_CHECKSUM_DIGITS: Final = 8
"""crc32 in hex."""

_COLUMNS: Final = 20
"""The ``orders_fired`` columns a record carries after its kind."""


class JournalWriteError(OSError):
    """A record could not be appended (the file system refused it, or took only part of it)."""


def journal_path(db_path: Path) -> Path:
    """Where the journal of the database at ``db_path`` lives."""
    return db_path.with_name(db_path.name + JOURNAL_SUFFIX)


RecordFields = tuple[object, ...]
"""A record's JSON array: the row's kind (``OrderRowKind`` value), then its 20 columns in
``orders_fired``'s order, the status as its value (what :func:`row_record_fields` makes; the order
path builds a pending row's directly, ``executor.exchange.orders.rows.pending_record``)."""

CLIENT_ORDER_ID_FIELD: Final = 2
"""Where a record's ``client_order_id`` is in its fields."""

STATUS_FIELD: Final = 12
"""Where a record's status is in its fields."""


def row_record_fields(row: OrderRow) -> RecordFields:
    """The fields of ``row``'s record."""
    return (row.kind.value, *order_values(row))


def frame_record(fields: RecordFields) -> bytes:
    """One journal line of ``fields``: checksum, space, JSON array, newline."""
    payload = orjson.dumps(fields)
    return b"%08x %b\n" % (zlib.crc32(payload), payload)


def encode_record(row: OrderRow) -> bytes:
    """One journal line for ``row``."""
    return frame_record(row_record_fields(row))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r:.40}")
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r:.40}")
    return value


def decode_record(line: bytes) -> OrderRow:
    """The row one journal line holds (without its newline).

    Raises:
        ValueError: the line is torn: short, a checksum that does not match, not JSON, or not a
            row (wrong count or types of fields).
    """
    checksum, space, payload = line[:_CHECKSUM_DIGITS], line[_CHECKSUM_DIGITS:][:1], line[9:]
    if space != b" " or int(checksum, 16) != zlib.crc32(payload):
        raise ValueError("checksum does not match")
    fields = orjson.loads(payload)
    if not isinstance(fields, list) or len(fields) != _COLUMNS + 1:
        raise ValueError("not a row")
    requested_at_ms = _optional_int(fields[18])
    if requested_at_ms is None:
        raise ValueError("no requested_at_ms")
    return OrderRow(
        kind=OrderRowKind(fields[0]),
        correlation_id=_text(fields[1]),
        client_order_id=_text(fields[2]),
        kalshi_order_id=_optional_text(fields[3]),
        ticker=_text(fields[4]),
        correlation_group=_optional_text(fields[5]),
        outcome_side=_text(fields[6]),
        count=_text(fields[7]),
        price_dollars=_text(fields[8]),
        time_in_force=_text(fields[9]),
        self_trade_prevention_type=_text(fields[10]),
        post_only=_optional_int(fields[11]),
        status=OrderStatus(fields[12]),
        error_message=_optional_text(fields[13]),
        fill_count=_optional_text(fields[14]),
        remaining_count=_optional_text(fields[15]),
        average_fill_price=_optional_text(fields[16]),
        average_fee_paid=_optional_text(fields[17]),
        requested_at_ms=requested_at_ms,
        submitted_at_ms=_optional_int(fields[19]),
        acknowledged_at_ms=_optional_int(fields[20]),
    )


@dataclass(frozen=True, slots=True)
class JournalContents:
    """What a journal file holds: the latest row per order, in the order first seen, and how
    many records were torn (skipped)."""

    rows: list[OrderRow] = field(default_factory=list)
    records: int = 0
    torn: int = 0


def read_journal(path: Path) -> JournalContents:
    """Read the journal at ``path`` (blocking); a missing file is an empty journal.

    Raises:
        OSError: the file exists but cannot be read.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JournalContents()
    lines = data.split(b"\n")
    torn = int(bool(lines[-1]))  # bytes after the last newline: a record cut short
    latest: dict[str, OrderRow] = {}
    records = 0
    for line in lines[:-1]:
        try:
            row = decode_record(line)
        except (ValueError, orjson.JSONDecodeError):
            torn += 1
            continue
        records += 1
        latest[row.client_order_id] = row
    return JournalContents(list(latest.values()), records, torn)


_PENDING: Final = OrderStatus.PENDING.value


def _supersedes(committed: OrderRow, journaled: RecordFields) -> bool:
    """Whether a committed row makes a journaled record unneeded: any row settles a pending
    record; only a row that is not pending settles a resolution."""
    return committed.status is not OrderStatus.PENDING or journaled[STATUS_FIELD] == _PENDING


class IntentJournal:
    """The open journal: appends, and which records the database still lacks.

    Not thread-safe: every method runs on the Trio thread (the dispatcher's appends, the
    consumer's settling and keeping).
    """

    def __init__(self, path: Path, descriptor: int, size: int) -> None:
        self.path = path
        self._descriptor = descriptor
        self._size = size
        self._compact_at = COMPACT_AT_BYTES
        self._outstanding: dict[str, RecordFields] = {}
        self.appended = 0
        self.compactions = 0

    @classmethod
    def open(cls, path: Path, *, truncate: bool = False) -> IntentJournal:
        """Open (creating it 0600) the journal for appending; ``truncate`` starts it empty.

        Raises:
            OSError: the file cannot be created or opened.
        """
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        descriptor = os.open(path, flags | (os.O_TRUNC if truncate else 0), JOURNAL_MODE)
        try:
            os.fchmod(descriptor, JOURNAL_MODE)  # the mode above is masked by the umask
            size = os.fstat(descriptor).st_size
        except OSError:
            os.close(descriptor)
            raise
        return cls(path, descriptor, size)

    @property
    def size(self) -> int:
        """The file's length now (bytes)."""
        return self._size

    def outstanding(self) -> frozenset[str]:
        """The orders whose latest record the database is not known to have yet."""
        return frozenset(self._outstanding)

    def append(self, row: OrderRow) -> None:
        """Append ``row``'s record (:meth:`append_fields`)."""
        self.append_fields(row_record_fields(row))

    def append_fields(self, fields: RecordFields) -> None:
        """Append the record of ``fields`` with one ``os.write``; it is outstanding until
        settled.

        Raises:
            JournalWriteError: the write failed or was short (a short tail is cut off again, so
                the next record starts on a line of its own).
        """
        record = frame_record(fields)
        try:
            written = os.write(self._descriptor, record)
        except OSError as error:
            raise JournalWriteError(error.errno, f"intent journal {self.path}: {error}") from None
        if written != len(record):
            with contextlib.suppress(OSError):
                os.ftruncate(self._descriptor, self._size)
            raise JournalWriteError(
                errno.ENOSPC, f"intent journal {self.path}: short write ({written} bytes)"
            )
        self._size += written
        self.appended += 1
        client_order_id = fields[CLIENT_ORDER_ID_FIELD]
        assert isinstance(client_order_id, str)
        self._outstanding[client_order_id] = fields

    def settle(self, committed: Iterable[OrderRow]) -> None:
        """The database has committed these rows: forget the records they make unneeded, and
        compact the file if it has grown past its threshold."""
        outstanding = self._outstanding
        for row in committed:
            journaled = outstanding.get(row.client_order_id)
            if journaled is not None and _supersedes(row, journaled):
                del outstanding[row.client_order_id]
        if self._size >= self._compact_at:
            self.compact()

    def compact(self) -> None:
        """Drop every settled record: truncate when nothing is outstanding, else rewrite the
        file with the outstanding records (beside it, then renamed over it). A failure is
        logged and leaves the file as it was."""
        records = b"".join(frame_record(fields) for fields in self._outstanding.values())
        try:
            if not records:
                os.ftruncate(self._descriptor, 0)
            else:
                self._rewrite(records)
        except OSError as error:
            log.warning("intent journal compaction failed", path=str(self.path), error=str(error))
            self._compact_at = self._size + COMPACT_AT_BYTES  # not again at once
            return
        self._size = len(records)
        self._compact_at = max(COMPACT_AT_BYTES, 2 * self._size)
        self.compactions += 1

    def _rewrite(self, records: bytes) -> None:
        staging = self.path.with_name(self.path.name + ".new")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        descriptor = os.open(staging, flags, JOURNAL_MODE)
        try:
            os.fchmod(descriptor, JOURNAL_MODE)
            if os.write(descriptor, records) != len(records):
                raise JournalWriteError(errno.ENOSPC, f"{staging}: short write")
            # The new file's records reach the disk before its name replaces the journal's, and
            # the rename itself after: a power cut leaves the old journal or the whole new one,
            # never an empty or partial file under the journal's name.
            os.fsync(descriptor)
            os.replace(staging, self.path)
            _fsync_directory(self.path.parent)
        except BaseException:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                staging.unlink()
            raise
        os.close(descriptor)
        replacement = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        os.close(self._descriptor)
        self._descriptor = replacement

    def close(self) -> None:
        """Compact (so a clean exit leaves only what the database lacks) and close the file."""
        if self._descriptor < 0:
            return
        self.compact()
        os.close(self._descriptor)
        self._descriptor = -1


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (its entry, not only the file's bytes)."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


__all__ = [
    "CLIENT_ORDER_ID_FIELD",
    "COMPACT_AT_BYTES",
    "JOURNAL_SUFFIX",
    "STATUS_FIELD",
    "IntentJournal",
    "JournalContents",
    "JournalWriteError",
    "RecordFields",
    "decode_record",
    "encode_record",
    "frame_record",
    "journal_path",
    "read_journal",
    "row_record_fields",
]
