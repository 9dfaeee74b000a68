"""This installation's identity on the exchange: the prefix of every ``client_order_id`` it mints,
and how far back its orders still have to be looked for.

Every order this executor sends carries a ``client_order_id`` of 32 lowercase hex digits (the shape
the reference's ``uuid4().hex`` has): the first :data:`PREFIX_DIGITS` are this installation's
prefix, the other 24 (96 bits) are random per order. The prefix is made once, at random, and kept
in the database the orders are audited in (table ``executor_installation``, one row), so a
restart on the same file mints ids with the same prefix, and start-up can tell this
installation's orders on the exchange from other clients' on the same account
(``executor.exchange.follow.adoption``). Another client's random 32-hex id shares the prefix with
odds of 1 in 2**32. A copy of the database used by a second executor would share the prefix too: one
database per executor.

The table is the executor's own (the reference has no such table and ignores it; ``CREATE TABLE
IF NOT EXISTS`` leaves the reference's tables alone), created only by an executor with an
exchange. Its ``adopt_since_ms`` is when the earliest run whose orders were not yet checked
against the exchange began: adoption lists the account's orders from there, and moves it to the
start of the current run once a pass has covered everything before it.

Blocking: the functions that touch the file run in a worker thread at start-up.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from executor.recording.database import WRITE_ERRORS, TelemetryOpenError, open_database

PREFIX_DIGITS: Final = 8
"""Hex digits of the installation prefix: 32 bits, so another client's random id matches it once
in 4 billion; the other 24 digits (96 random bits) keep one installation's ids apart."""

CLIENT_ORDER_ID_DIGITS: Final = 32
"""The length of a ``client_order_id`` (a uuid4 hex's, as the reference mints them)."""

_RANDOM_BYTES: Final = (CLIENT_ORDER_ID_DIGITS - PREFIX_DIGITS) // 2

_HEX: Final = frozenset("0123456789abcdef")

INSTALLATION_SCHEMA: Final = """CREATE TABLE IF NOT EXISTS executor_installation (
    id                      INTEGER PRIMARY KEY CHECK (id = 1),
    client_order_id_prefix  TEXT    NOT NULL CHECK (length(client_order_id_prefix) = 8),
    created_at_ms           INTEGER NOT NULL,
    adopt_since_ms          INTEGER
)"""
"""The executor's own table (one row): not the reference's, which never reads it."""


def new_prefix() -> str:
    """A fresh random installation prefix."""
    return os.urandom(PREFIX_DIGITS // 2).hex()


IDS_DRAWN_AHEAD: Final = 2
"""Ids :meth:`ClientOrderIds.take` keeps drawn ahead: one for the next real order, one for a
second within the same batch; the rest are drawn when needed. Drawing one is a ``getrandom``
system call and a string, tens of µs on a cold path (docs/performance/notebook/, 2026-12-02)."""


class ClientOrderIds:
    """Mints this installation's ``client_order_id`` values and recognises them.

    A real order takes an id drawn ahead (:meth:`take`), and the order path draws the next ones
    after its request is written (:meth:`draw_ahead`), so the system call is off the order's way
    to the wire. Every id, drawn ahead or not, is the prefix and 96 fresh random bits.
    """

    __slots__ = ("_ahead", "prefix")

    def __init__(self, prefix: str) -> None:
        if len(prefix) != PREFIX_DIGITS or not set(prefix) <= _HEX:
            raise ValueError(f"installation prefix must be {PREFIX_DIGITS} hex digits: {prefix!r}")
        self.prefix = prefix
        self._ahead: list[str] = []

    def mint(self) -> str:
        """A fresh id: the prefix and 96 random bits, 32 lowercase hex digits."""
        return self.prefix + os.urandom(_RANDOM_BYTES).hex()

    def take(self) -> str:
        """An id drawn ahead, or a fresh one when none is left. Never reused: each is taken
        once."""
        ahead = self._ahead
        return ahead.pop() if ahead else self.mint()

    def draw_ahead(self) -> None:
        """Draw ids until :data:`IDS_DRAWN_AHEAD` wait for :meth:`take`."""
        ahead = self._ahead
        while len(ahead) < IDS_DRAWN_AHEAD:
            ahead.append(self.mint())

    def is_ours(self, client_order_id: object) -> bool:
        """Whether an id seen on the exchange is one this installation minted."""
        return (
            isinstance(client_order_id, str)
            and len(client_order_id) == CLIENT_ORDER_ID_DIGITS
            and client_order_id.startswith(self.prefix)
            and set(client_order_id) <= _HEX
        )


@dataclass(frozen=True, slots=True)
class Installation:
    """What the database says about this installation.

    Attributes:
        prefix: the ``client_order_id`` prefix.
        created: True when this start-up made it (no earlier run can have minted it).
        adopt_since_ms: when the earliest run whose orders are still to be checked began (this
            run, when ``created``; None only on a row whose value was cleared by hand: then
            adoption looks as far back as the exchange's live listing goes).
    """

    prefix: str
    created: bool
    adopt_since_ms: int | None

    @property
    def ids(self) -> ClientOrderIds:
        """The minting of this prefix."""
        return ClientOrderIds(self.prefix)


def load_installation(db_path: Path, now_ms: int) -> Installation:
    """Read this installation's row, making it (with a fresh prefix) when there is none (blocking).

    Raises:
        TelemetryOpenError: the file cannot be opened or written.
    """
    connection, _ = open_database(db_path)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(INSTALLATION_SCHEMA)
        found = connection.execute(
            "SELECT client_order_id_prefix, adopt_since_ms FROM executor_installation"
        ).fetchone()
        if found is None:
            prefix = new_prefix()
            connection.execute(
                "INSERT INTO executor_installation"
                " (id, client_order_id_prefix, created_at_ms, adopt_since_ms) VALUES (1, ?, ?, ?)",
                (prefix, now_ms, now_ms),
            )
            connection.execute("COMMIT")
            return Installation(prefix, created=True, adopt_since_ms=now_ms)
        connection.execute("COMMIT")
        return Installation(str(found[0]), created=False, adopt_since_ms=found[1])
    except WRITE_ERRORS as error:
        with contextlib.suppress(*WRITE_ERRORS):
            connection.execute("ROLLBACK")
        raise TelemetryOpenError(
            f"cannot read or record this installation in {db_path}: {error}"
        ) from None
    finally:
        connection.close()


def save_adopt_since(db_path: Path, adopt_since_ms: int) -> None:
    """Record that every order before ``adopt_since_ms`` has been checked (blocking).

    Raises:
        sqlite3.Error: the write failed (the next start-up then looks further back: harmless).
    """
    with contextlib.closing(sqlite3.connect(db_path, timeout=5.0, isolation_level=None)) as db:
        db.execute("UPDATE executor_installation SET adopt_since_ms = ?", (adopt_since_ms,))


__all__ = [
    "CLIENT_ORDER_ID_DIGITS",
    "INSTALLATION_SCHEMA",
    "PREFIX_DIGITS",
    "ClientOrderIds",
    "Installation",
    "load_installation",
    "new_prefix",
    "save_adopt_since",
]
