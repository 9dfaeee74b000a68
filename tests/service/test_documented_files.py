"""What the operations guide (docs/operations/) says a telemetry file holds, and what
``executor orders --json`` prints for it, hold for a file a real ``executor serve`` made (issue
23, item 9).

Each test reads the sentence from the document and the facts from a file an executor just wrote,
so the two cannot drift apart: the sentences these replace ("only the two tables this executor
writes are created"; ``"orders": null`` for an executor without an exchange) fail them.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.support.processes import Spawner

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = (
    ROOT / "docs" / "operations" / "data.md",
    ROOT / "docs" / "operations" / "monitoring.md",
)
"""The pages that say what a file holds and what ``executor orders`` prints."""

EVERY_FILE = re.compile(r"a file this executor has opened holds (.+?)\.\s")
"""The sentence naming the tables of every file an executor opened."""

WITH_AN_EXCHANGE = re.compile(r"An executor with an exchange adds (.+?)\.\s")
"""The sentence naming the tables an executor with an exchange adds."""

TABLE_NAME = re.compile(r"`([a-z_]+)`")
ORDERS_SECTION = "## `executor orders`"
NO_ORDERS = "`no orders`"
DOCUMENTED_ORDERS = re.compile(r'`"orders": ([^`]+)`')


def operations_text() -> str:
    """The operations pages with every run of white space made one space (sentences span lines)."""
    return " ".join(" ".join(page.read_text() for page in OPERATIONS).split())


def named_tables(pattern: re.Pattern[str], text: str) -> set[str]:
    """The backquoted names in the one sentence of ``text`` that ``pattern`` finds."""
    (sentence,) = pattern.findall(text)
    return set(TABLE_NAME.findall(sentence))


def documented_tables(exchange: str, text: str) -> set[str]:
    """The tables the guide says a file holds once an executor with ``--exchange exchange``
    has opened it."""
    tables = named_tables(EVERY_FILE, text)
    if exchange != "none":
        tables |= named_tables(WITH_AN_EXCHANGE, text)
    return tables


def written_file(spawner: Spawner, directory: Path, exchange: str) -> Path:
    """A telemetry file a real executor with ``--exchange exchange`` started on and stopped."""
    database = directory / "t.db"
    executor = spawner.serve(directory / "x.sock", database, "--exchange", exchange)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0, executor.stderr()[-3000:]
    return database


def tables_in(database: Path) -> set[str]:
    """The tables of ``database``, SQLite's own (``sqlite_*``, such as ``sqlite_sequence``) left
    out."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%'"
            " ESCAPE '\\'"
        ).fetchall()
    return {name for (name,) in rows}


@pytest.mark.parametrize("exchange", ["none", "fake"])
def test_the_tables_a_file_holds_are_the_ones_documented(
    spawner: Spawner, short_dir: Path, exchange: str
) -> None:
    """The tables in a file an executor (with or without an exchange) made are exactly those
    the guide names for it."""
    database = written_file(spawner, short_dir, exchange)
    assert tables_in(database) == documented_tables(exchange, operations_text())


def test_the_table_sentences_are_found_and_compared() -> None:
    """Negative twin: the sentences name four tables and two more, and the old sentence ("only
    the two tables this executor writes are created") names none, so the comparison fails on it."""
    text = operations_text()
    assert len(documented_tables("none", text)) == 4
    assert len(documented_tables("fake", text)) == 7
    old = "WAL mode, a 5 s busy timeout, and only the two tables this executor writes are created. "
    with pytest.raises(ValueError, match="not enough values"):
        documented_tables("none", old)


def documented_empty_orders(text: str) -> str:
    """The JSON value the guide gives for ``orders`` in the clause of its ``executor orders``
    section that says when the command prints ``no orders``."""
    section = text[text.index(ORDERS_SECTION) :]
    (clause,) = [clause for clause in re.split(r"(?<=[.;])\s+", section) if NO_ORDERS in clause]
    (value,) = DOCUMENTED_ORDERS.findall(clause)
    return str(value)


def test_orders_json_of_an_executors_empty_file_is_an_empty_list(
    spawner: Spawner, short_dir: Path
) -> None:
    """``executor orders`` on the file of an executor without an exchange prints ``no orders``
    and, with ``--json``, ``"orders": []``, which is what the guide says in that place."""
    database = written_file(spawner, short_dir, "none")
    table = spawner.run("orders", "--telemetry-db", database)
    assert table.returncode == 0 and "no orders" in table.stdout.splitlines(), table.stdout
    document = spawner.run("orders", "--telemetry-db", database, "--json")
    assert document.returncode == 0, document.stderr
    printed = json.loads(document.stdout)["orders"]
    assert printed == []
    assert json.loads(documented_empty_orders(operations_text())) == printed


def test_the_orders_clause_is_found() -> None:
    """Negative twin: the old clause, which gave no JSON for a file with the table and ``null``
    for an executor's file, yields no value to compare, so the test above fails on it."""
    old = (
        "## `executor orders`: the recent orders A file with the table but no rows prints `no"
        " orders`; a file without the table (an executor that never had an exchange) says so and"
        ' exits 0 (`"orders": null` in JSON). Bad input is one line.'
    )
    with pytest.raises(ValueError, match="not enough values"):
        documented_empty_orders(" ".join(old.split()))
