"""The telemetry file's life: open and initialise it, prove it writable, close it, and clean up
after a refused start.

Blocking, like everything the writer thread runs (``executor.recording.sqlite_writer`` writes
the batches; ``executor.recording.consumer`` owns the thread discipline). The schema it creates is
``executor.recording.schema``'s.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
from pathlib import Path
from typing import Any, Final

import structlog

from executor.recording.schema import REFERENCE_USER_VERSION, SCHEMA_STATEMENTS

BUSY_TIMEOUT_MS: Final = 5000
"""SQLite waits this long (ms) for another writer's lock (the reference poller shares the file)."""


WRITE_ERRORS: Final = (sqlite3.Error, OSError, ValueError, OverflowError)
"""What a write may raise: SQLite and disk errors, and values sqlite3 cannot bind (a lone
surrogate, an integer beyond int64). None of them may end the consumer."""

logger = structlog.get_logger()


def describe(error: OSError) -> str:
    """``EROFS: Read-only file system``: the error's name and words, as an operator greps them."""
    name = errno.errorcode.get(error.errno or 0, "error")
    return f"{name}: {error.strerror or error}"


class TelemetryOpenError(Exception):
    """The telemetry database could not be opened or initialised (message names the path)."""


def path_problem(path: Path) -> str | None:
    """What is wrong with ``path``'s folders, in words (mkdir's own "File exists" is not)."""
    for ancestor in path.parents:
        if ancestor.is_symlink() or ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is not a directory"
            return None
    return None


def open_database(path: Path) -> tuple[sqlite3.Connection, bool]:
    """Open and initialise the database; return the connection and whether this call created it.

    "Created" is decided under SQLite's write lock: a file that is empty (it was absent, or zero
    bytes) while we hold ``BEGIN IMMEDIATE`` is ours, even if another process raced us to open it.
    WAL is switched on after that first transaction, since setting it writes the file header.

    Raises:
        TelemetryOpenError: the path cannot be opened or initialised.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            # sqlite3 reports a directory as a generic "unable to open"; say what it is.
            raise TelemetryOpenError(f"telemetry database {path} is a directory")
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except TelemetryOpenError:
        raise
    except (sqlite3.Error, OSError) as error:
        raise TelemetryOpenError(
            f"cannot open telemetry database {path}: {path_problem(path) or error}"
        ) from None
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("BEGIN IMMEDIATE")
        try:
            # Under the write lock nobody else can be mid-creation; a committed database (WAL
            # or not) always has its header page in the main file, so zero bytes means new.
            created = path.stat().st_size == 0
            for statement in SCHEMA_STATEMENTS:
                connection.execute(statement)
            if created:
                connection.execute(f"PRAGMA user_version = {REFERENCE_USER_VERSION}")
            connection.execute("COMMIT")
        except BaseException:
            rollback_quietly(connection)
            raise
        (journal_mode,) = connection.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(journal_mode).lower() != "wal":
            raise TelemetryOpenError(
                f"telemetry database {path} refused WAL mode (journal_mode={journal_mode})"
            )
    except TelemetryOpenError:
        connection.close()
        raise
    except (sqlite3.Error, OSError) as error:
        connection.close()
        raise TelemetryOpenError(f"cannot initialise telemetry database {path}: {error}") from error
    return connection, created


def open_read_only(path: Path, reason: OSError) -> sqlite3.Connection:
    """Open an existing database this process cannot write (``reason`` says why), so that an
    executor without an exchange can serve beside it: its rows then fail and are counted.

    ``mode=ro`` first; a WAL database in a folder that cannot take the ``-shm`` a reader needs,
    with neither ``-wal`` nor ``-shm`` there (so no writer is active), is opened ``immutable``.

    Raises:
        TelemetryOpenError: it cannot be read either.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    failure: sqlite3.Error | None = None
    for suffix in ("", "&immutable=1"):
        try:
            connection = sqlite3.connect(
                uri + suffix, uri=True, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            failure = error
            continue
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as error:
            connection.close()
            failure = error
            continue
        logger.warning(
            "telemetry database is read-only: every row will be dropped and counted",
            path=str(path),
            error=describe(reason),
        )
        return connection
    raise TelemetryOpenError(f"cannot read telemetry database {path}: {failure}")


def prove_writable(connection: sqlite3.Connection, path: Path) -> None:
    """Commit one write that changes nothing (``user_version`` rewritten with its own value), so a
    database that opens but cannot be written (a read-only file, a full disk) is found now.

    Raises:
        TelemetryOpenError: the write or its commit failed.
    """
    try:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(f"PRAGMA user_version = {int(version)}")
        connection.execute("COMMIT")
    except WRITE_ERRORS as error:
        rollback_quietly(connection)
        raise TelemetryOpenError(
            f"telemetry database {path} is not writable ({error}): "
            "with an exchange the executor does not trade without its audit trail"
        ) from None


DATABASE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")
"""The files SQLite keeps for a database at ``path`` (``path`` + suffix)."""


def database_files(path: Path) -> list[Path]:
    """The database's files that exist now."""
    return [
        path.with_name(path.name + suffix)
        for suffix in DATABASE_SUFFIXES
        if path.with_name(path.name + suffix).exists()
    ]


def remove_new_files(path: Path, existed: list[Path]) -> None:
    """After a refused start (the connection closed): remove the database files that were not in
    ``existed`` before it opened (SQLite leaves an empty ``-wal`` and a ``-shm`` beside a file it
    could not write). Blocking: call it from a worker thread."""
    for leftover in database_files(path):
        if leftover not in existed:
            with contextlib.suppress(OSError):
                leftover.unlink()


def rollback_quietly(connection: sqlite3.Connection) -> None:
    """Roll back whatever transaction is open; a failing rollback must not hide the first error."""
    try:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
    except WRITE_ERRORS:
        pass


def close_database(connection: sqlite3.Connection, path: Path) -> None:
    """Close the connection; an error here is logged, since every row is already committed."""
    try:
        connection.close()
    except WRITE_ERRORS as error:
        logger.warning("telemetry database close failed", path=str(path), error=str(error))


def read_orders_fired(
    path: Path, sql: str, parameters: tuple[object, ...]
) -> list[tuple[Any, ...]]:
    """Run one query over ``orders_fired`` on a read-only connection (blocking).

    A missing file, or a file without the table (an executor that never had an exchange), gives
    ``[]``: nothing was ordered.

    Raises:
        sqlite3.Error: the file exists but cannot be read (corrupt, locked past the timeout).
    """
    if not path.exists():
        return []
    uri = f"{path.resolve().as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
        (has_table,) = connection.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'orders_fired'"
        ).fetchone()
        if not has_table:
            return []
        return connection.execute(sql, parameters).fetchall()
