"""``executor orders``: newest first, filters, the JSON document, read-only access, bad input."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.recording.database import open_database
from executor.stats.orders import SCHEMA_ID, orders_main
from tests.support.processes import Spawner

HOUR_MS = 3_600_000


def now_ms() -> int:
    """Wall-clock ms now."""
    return time.time_ns() // 1_000_000


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A writable autocommit connection, closed on exit."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        yield connection


def insert_order(path: Path, **columns: Any) -> None:
    """One ``orders_fired`` row; unnamed columns take plain defaults."""
    row: dict[str, Any] = {
        "correlation_id": "c",
        "client_order_id": f"client-{time.perf_counter_ns()}",
        "kalshi_order_id": None,
        "ticker": "KXBTCD-26AUG2917-T112750",
        "outcome_side": "yes",
        "count": "3.00",
        "price_dollars": "0.5600",
        "time_in_force": "fill_or_kill",
        "self_trade_prevention_type": "taker_at_cross",
        "status": "filled",
        "error_message": None,
        "fill_count": None,
        "requested_at_ms": now_ms(),
        **columns,
    }
    with connect(path) as db:
        db.execute("INSERT OR IGNORE INTO correlations VALUES (?, 0)", (row["correlation_id"],))
        db.execute(
            f"INSERT INTO orders_fired ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
            list(row.values()),
        )


@pytest.fixture
def orders_db(tmp_path: Path) -> Path:
    """Four orders: a fill and an error an hour ago on two tickers, a kill and a refusal now."""
    path = tmp_path / "telemetry.db"
    connection, _ = open_database(path)
    connection.close()
    old = now_ms() - 2 * HOUR_MS
    insert_order(
        path,
        client_order_id="o1",
        requested_at_ms=old,
        status="filled",
        fill_count="3.00",
        kalshi_order_id="ex-1",
    )
    insert_order(
        path,
        client_order_id="o2",
        requested_at_ms=old + 1,
        status="error",
        ticker="KXETH-T1",
        error_message="exchange answered 503",
    )
    insert_order(
        path,
        client_order_id="o3",
        requested_at_ms=now_ms() - 1000,
        status="canceled",
        fill_count="0.00",
        kalshi_order_id="ex-3",
        outcome_side="no",
    )
    insert_order(
        path,
        client_order_id="o4",
        requested_at_ms=now_ms(),
        status="rejected",
        error_message="risk gate: cooldown on KXBTCD-26AUG2917-T112750 yes",
    )
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str | os.PathLike[str]) -> Any:
    """``executor orders ARGV --json`` in-process, parsed."""
    assert orders_main([*map(os.fspath, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def client_ids(document: Any) -> list[str]:
    """The listed orders' client order ids, in the document's order."""
    return [order["client_order_id"] for order in document["orders"]]


def test_text_table_lists_orders_newest_first(
    capsys: pytest.CaptureFixture[str], orders_db: Path
) -> None:
    """The table has a header and one aligned line per order, the newest on top."""
    assert orders_main(["--telemetry-db", str(orders_db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{orders_db} (all rows; newest first, at most 20)")
    header, *rows = lines[1:]
    assert header.split()[:3] == ["requested", "(UTC)", "ticker"]
    assert [row.split()[6] for row in rows] == ["rejected", "canceled", "error", "filled"]
    filled = rows[3].split()
    assert filled[2:9] == [
        "KXBTCD-26AUG2917-T112750",
        "yes",
        "3.00",
        "0.5600",
        "filled",
        "3.00",
        "ex-1",
    ]
    assert "risk gate: cooldown" in rows[0]
    side_column = header.index("side")
    assert [row[side_column : side_column + 3].strip() for row in rows] == [
        "yes",
        "no",
        "yes",
        "yes",
    ]


def test_the_error_column_keeps_its_end(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A long error is shown whole in the table, down to its last words (the hint to act on),
    on one line."""
    path = tmp_path / "telemetry.db"
    connection, _ = open_database(path)
    connection.close()
    message = (
        "exchange answered 409 (order_group_trading_halted):\n order group "
        "5699e150d1fa4dc58b5828e9a7afe17c is triggered: reset it to place orders"
    )
    insert_order(path, status="rejected", error_message=message)
    assert orders_main(["--telemetry-db", str(path)]) == 0
    (row,) = capsys.readouterr().out.splitlines()[2:]
    assert row.endswith(" ".join(message.split()))
    assert row.endswith("is triggered: reset it to place orders")


def test_json_document(capsys: pytest.CaptureFixture[str], orders_db: Path) -> None:
    """--json gives the schema id, the filters and every column of each row, newest first."""
    document = run_json(capsys, "--telemetry-db", orders_db)
    assert document["schema"] == SCHEMA_ID
    assert (document["since_ms"], document["statuses"], document["ticker"]) == (None, None, None)
    assert document["limit"] == 20
    assert client_ids(document) == ["o4", "o3", "o2", "o1"]
    first_fill = document["orders"][3]
    assert first_fill["fill_count"] == "3.00"
    assert first_fill["kalshi_order_id"] == "ex-1"
    assert first_fill["price_dollars"] == "0.5600"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--status", "error"], ["o2"]),
        (["--status", "filled,canceled"], ["o3", "o1"]),
        (["--ticker", "KXETH-T1"], ["o2"]),
        (["--since", "15m"], ["o4", "o3"]),
        (["--limit", "1"], ["o4"]),
        (["--ticker", "KXBTCD-26AUG2917-T112750", "--status", "rejected"], ["o4"]),
        (["--ticker", "NOPE"], []),
    ],
)
def test_filters(
    capsys: pytest.CaptureFixture[str], orders_db: Path, argv: list[str], expected: list[str]
) -> None:
    """--status, --ticker, --since and --limit each narrow the list, and they combine."""
    document = run_json(capsys, "--telemetry-db", orders_db, *argv)
    assert client_ids(document) == expected


def test_empty_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file with an empty orders_fired says "no orders" (text) and an empty list (JSON)."""
    path = tmp_path / "empty.db"
    connection, _ = open_database(path)
    connection.close()
    assert orders_main(["--telemetry-db", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "no orders"
    assert run_json(capsys, "--telemetry-db", path)["orders"] == []


def test_a_file_an_executor_without_an_exchange_wrote_has_no_orders(
    capsys: pytest.CaptureFixture[str], short_dir: Path
) -> None:
    """A real ``executor serve`` without an exchange leaves the table, empty: ``no orders`` and
    ``"orders": []`` (what the guide says), never ``null``."""
    socket_path, path = short_dir / "x.sock", short_dir / "t.db"
    spawner = Spawner(short_dir)
    try:
        executor = spawner.serve(socket_path, path, "--exchange", "none")
        executor.signal(signal.SIGTERM)
        assert executor.wait() == 0
    finally:
        spawner.kill_all()
    assert orders_main(["--telemetry-db", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "no orders"
    assert run_json(capsys, "--telemetry-db", path)["orders"] == []


def test_a_file_without_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file without the table (another program's: trio-executor always creates it): said,
    JSON null."""
    path = tmp_path / "latency-only.db"
    connection, _ = open_database(path)
    connection.execute("DROP TABLE orders_fired")
    connection.close()
    assert orders_main(["--telemetry-db", str(path)]) == 0
    assert "orders_fired: no such table" in capsys.readouterr().out
    assert run_json(capsys, "--telemetry-db", path)["orders"] is None


def test_reads_a_read_only_file_without_changing_it(
    capsys: pytest.CaptureFixture[str], orders_db: Path
) -> None:
    """A 0444 file is listed, and neither its bytes nor its mtime change."""
    with connect(orders_db) as db:
        db.execute("PRAGMA journal_mode = DELETE")
    orders_db.chmod(0o444)
    before = (orders_db.read_bytes(), orders_db.stat().st_mtime_ns)
    assert client_ids(run_json(capsys, "--telemetry-db", orders_db)) == ["o4", "o3", "o2", "o1"]
    assert (orders_db.read_bytes(), orders_db.stat().st_mtime_ns) == before


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--telemetry-db", "/nonexistent/t.db"], "no such file"),
        (["--status", "done"], "argument --status"),
        (["--limit", "0"], "argument --limit"),
        (["--since", "yesterday"], "--since 'yesterday'"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], orders_db: Path, argv: list[str], needle: str
) -> None:
    """A missing file, an unknown status, a bad limit or window: one line on stderr, exit 2."""
    if "--telemetry-db" not in argv:
        argv = ["--telemetry-db", str(orders_db), *argv]
    with (
        pytest.raises(SystemExit)
        if argv[-2] in ("--status", "--limit")
        else contextlib.nullcontext()
    ):
        assert orders_main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and needle in captured.err, captured.err


def test_the_command_line_dispatches_orders(orders_db: Path) -> None:
    """``python -m executor orders`` runs this command; ``executor --help`` lists it."""
    listed = subprocess.run(
        [sys.executable, "-m", "executor", "orders", "--telemetry-db", str(orders_db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert "ex-3" in listed.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "executor", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "orders" in shown.stdout
