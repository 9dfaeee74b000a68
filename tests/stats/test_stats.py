"""``executor stats``: percentiles, filters, the JSON document, read-only access, bad input."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from executor.recording.database import open_database
from executor.recording.orders.terms import (
    ADOPTED_MESSAGE,
    NO_SUCH_ORDER_PREFIX,
    OUTCOME_UNKNOWN_PREFIX,
    RECONCILED_PREFIX,
)
from executor.stats import command as stats
from executor.stats import queries as stats_db
from executor.stats.command import stats_main
from executor.stats.percentile import percentile, percentile_of_sorted
from executor.stats.queries import SCHEMA_ID, latency_filter


def now_ms() -> int:
    """Wall-clock ms now (read per use: a long suite run must not age the fixtures)."""
    return time.time_ns() // 1_000_000


HOUR_MS = 3_600_000


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A writable autocommit connection, closed on exit."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        yield connection


def make_db(path: Path) -> None:
    """A telemetry database as the executor creates it (WAL, schema, user_version)."""
    connection, _ = open_database(path)
    connection.close()


def drop_order_tables(path: Path) -> None:
    """Remove the tables the reference's own file would not have (only the latency tables stay)."""
    with connect(path) as db:
        db.execute("DROP TABLE orders_fired")
        db.execute("DROP TABLE heartbeats")


def insert_events(path: Path, rows: list[tuple[str, int, float, str | None]]) -> None:
    """``(stage, started_at_ms, duration_ms, metadata_json)`` rows, each with its own id."""
    with connect(path) as db:
        db.execute("BEGIN")
        for index, (stage, started_at_ms, duration_ms, metadata) in enumerate(rows):
            correlation_id = f"c-{stage}-{started_at_ms}-{index}"
            db.execute("INSERT OR IGNORE INTO correlations VALUES (?, ?)", (correlation_id, 0))
            db.execute(
                "INSERT INTO latency_events (correlation_id, stage, started_at_ms, ended_at_ms,"
                " duration_ms, metadata_json) VALUES (?, ?, ?, ?, ?, ?)",
                (correlation_id, stage, started_at_ms, started_at_ms, duration_ms, metadata),
            )
        db.execute("COMMIT")


def run_stats(capsys: pytest.CaptureFixture[str], *argv: str | os.PathLike[str]) -> Any:
    """Run ``executor stats ARGV --json`` in-process and return the parsed document."""
    assert stats_main([*map(os.fspath, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def row(document: Any, stage: str, mode: str) -> dict[str, Any]:
    """The latency entry for ``stage`` and ``mode``."""
    (found,) = [r for r in document["latency"] if r["stage"] == stage and r["mode"] == mode]
    return dict(found)


@pytest.fixture
def known_db(tmp_path: Path) -> tuple[Path, dict[tuple[str, str], list[float]]]:
    """Known durations: wake_recv real and shadow, sign without metadata, an odd stage."""
    path = tmp_path / "t.db"
    make_db(path)
    rng = random.Random(20261130)
    expected: dict[tuple[str, str], list[float]] = {}
    rows: list[tuple[str, int, float, str | None]] = []
    for stage, mode, metadata, count in (
        ("wake_recv", "real", '{"dry_run": false}', 301),
        ("wake_recv", "shadow", '{"dry_run": true}', 77),
        ("dispatch_ack", "shadow", '{"dry_run":true,"status":200}', 40),
        ("sign", "unknown", None, 25),
        ("custom_stage", "unknown", "not json", 3),
    ):
        values = [rng.lognormvariate(-2.0, 0.6) for _ in range(count)]
        expected[(stage, mode)] = values
        rows += [(stage, now_ms() - 1000 - i, value, metadata) for i, value in enumerate(values)]
    rng.shuffle(rows)
    insert_events(path, rows)
    return path, expected


# ---------------------------------------------------------------- percentiles


@given(st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=50), st.floats(0.0, 1.0))
def test_percentile_of_sorted_is_bit_identical_to_percentile(values: list[float], p: float) -> None:
    """Sorting once and asking many times gives the same bits as the project's percentile."""
    assert percentile_of_sorted(sorted(values), p) == percentile(values, p)


def test_percentiles_equal_the_projects_percentile(
    capsys: pytest.CaptureFixture[str], known_db: tuple[Path, dict[tuple[str, str], list[float]]]
) -> None:
    """Each stage and mode's n, p50, p90, p99 and max equal percentile() on the same values."""
    path, expected = known_db
    document = run_stats(capsys, "--telemetry-db", path)
    for (stage, mode), values in expected.items():
        entry = row(document, stage, mode if mode != "unknown" else "all")
        assert entry["n"] == len(values)
        assert entry["p50_ms"] == percentile(values, 0.5)
        assert entry["p90_ms"] == percentile(values, 0.9)
        assert entry["p99_ms"] == percentile(values, 0.99)
        assert entry["max_ms"] == max(values)
    everything = expected[("wake_recv", "real")] + expected[("wake_recv", "shadow")]
    assert row(document, "wake_recv", "all")["p99_ms"] == percentile(everything, 0.99)
    # A stage whose rows carry no dry_run flag has only its "all" line.
    assert [r["mode"] for r in document["latency"] if r["stage"] == "sign"] == ["all"]


def test_text_report_shows_every_stage_and_mode(
    capsys: pytest.CaptureFixture[str], known_db: tuple[Path, dict[tuple[str, str], list[float]]]
) -> None:
    """The human report has one line per stage and mode, with p50 to 4 decimals; a file without
    the order tables (the reference's own, say) says so."""
    path, expected = known_db
    drop_order_tables(path)
    assert stats_main(["--telemetry-db", os.fspath(path)]) == 0
    out = capsys.readouterr().out
    real = expected[("wake_recv", "real")]
    line = next(text for text in out.splitlines() if text.split()[:2] == ["wake_recv", "real"])
    assert line.split()[2] == str(len(real))
    assert line.split()[3] == f"{percentile(real, 0.5):.4f}"
    assert "orders_fired: no such table" in out
    assert "heartbeats: no such table" in out


def test_a_negative_cross_clock_stage_comes_with_its_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A ``wire_engine`` whose p50 is below 0 (the exchange's clock behind this host's) is
    followed by one note saying why; the positive ``engine_ack`` beside it is not named."""
    path = tmp_path / "t.db"
    make_db(path)
    now = now_ms()
    insert_events(
        path,
        [("wire_engine", now, -0.6, None)] * 3 + [("engine_ack", now, 1.4, None)] * 3,
    )
    assert stats_main(["--telemetry-db", os.fspath(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    wire = next(index for index, line in enumerate(lines) if line.startswith("wire_engine"))
    (note,) = [line for line in lines if line.startswith("note:")]
    assert note.startswith("note: wire_engine below 0: ")
    assert "exchange's clock is behind" in note
    assert lines.index(note) > wire


def test_no_note_when_every_cross_clock_stage_is_positive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The twin: positive ``wire_engine`` and ``engine_ack`` need no explanation."""
    path = tmp_path / "t.db"
    make_db(path)
    now = now_ms()
    insert_events(path, [("wire_engine", now, 0.6, None), ("engine_ack", now, 1.4, None)])
    assert stats_main(["--telemetry-db", os.fspath(path)]) == 0
    assert "note:" not in capsys.readouterr().out


# ---------------------------------------------------------------- the JSON document


def test_json_document_schema(
    capsys: pytest.CaptureFixture[str], known_db: tuple[Path, dict[tuple[str, str], list[float]]]
) -> None:
    """--json prints one document with the documented keys and types (null for absent tables)."""
    path, _ = known_db
    drop_order_tables(path)
    document = run_stats(capsys, "--telemetry-db", path)
    assert document["schema"] == SCHEMA_ID
    assert set(document) == {
        "schema",
        "database",
        "generated_at_ms",
        "since_ms",
        "stage",
        "latency",
        "orders_fired",
        "heartbeats",
    }
    assert document["since_ms"] is None
    assert document["orders_fired"] is None
    assert document["heartbeats"] is None
    for entry in document["latency"]:
        assert set(entry) == {"stage", "mode", "n", "p50_ms", "p90_ms", "p99_ms", "max_ms"}
        assert entry["mode"] in {"all", "real", "shadow", "unknown"}
        assert entry["p50_ms"] <= entry["p90_ms"] <= entry["p99_ms"] <= entry["max_ms"]


def test_orders_and_heartbeats_when_the_tables_exist(
    capsys: pytest.CaptureFixture[str], known_db: tuple[Path, dict[tuple[str, str], list[float]]]
) -> None:
    """orders_fired is counted by status with its top errors; heartbeats carry their age."""
    path, _ = known_db
    with connect(path) as db:  # the executor's own tables (open_database made them)
        orders = [("accepted", None)] * 5 + [("error", "timeout")] * 3 + [("error", "http 500")]
        for index, (status, error) in enumerate(orders):
            db.execute(
                "INSERT INTO orders_fired (correlation_id, client_order_id, ticker, outcome_side,"
                " count, price_dollars, time_in_force, self_trade_prevention_type, status,"
                " error_message, requested_at_ms) VALUES ('c', ?, 'T', 'yes', '1.00', '0.5000',"
                " 'fill_or_kill', 'taker_at_cross', ?, ?, ?)",
                (f"o{index}", status, error, now_ms()),
            )
        db.execute(
            "INSERT INTO heartbeats VALUES ('executor', 42, ?, ?, 7, 3)",
            (now_ms() - HOUR_MS, now_ms() - 5000),
        )
    document = run_stats(capsys, "--telemetry-db", path)
    assert document["orders_fired"] == {
        "total": 9,
        "by_status": {"accepted": 5, "error": 4},
        "top_errors": [
            {"error_message": "timeout", "count": 3},
            {"error_message": "http 500", "count": 1},
        ],
        "reconciliation": {
            "reconciled": 0,
            "reconcile_failed": 0,
            "outcome_unknown": 0,
            "open": 5,  # the accepted rows: the exchange has not said how they ended
            "adopted": 0,
        },
        "exchange_halts": {
            "refused_order_group": 0,
            "refused_paused": 0,
            "last_refused_at_ms": None,
        },
    }
    (beat,) = document["heartbeats"]
    assert (beat["process"], beat["pid"], beat["queue_depth"], beat["dropped_rows"]) == (
        "executor",
        42,
        7,
        3,
    )
    assert 5.0 <= beat["age_s"] < 5.0 + 600


def test_reconciled_and_unresolved_orders_are_counted(
    capsys: pytest.CaptureFixture[str], known_db: tuple[Path, dict[tuple[str, str], list[float]]]
) -> None:
    """Rows reconciliation corrected, rows the exchange did not have, rows still of unknown
    outcome and rows adopted from the exchange are counted apart, and the rows still open (a
    definite error is none of them; an absent row is not open)."""
    path, _ = known_db
    rows = [
        ("filled", RECONCILED_PREFIX + "no response within 2 s"),
        ("canceled", RECONCILED_PREFIX + "left pending by an earlier run"),
        ("error", NO_SUCH_ORDER_PREFIX + "no response within 2 s"),
        ("error", OUTCOME_UNKNOWN_PREFIX + "no response within 2 s"),
        ("error", "cancelled at shutdown"),
        ("error", "400 invalid_parameters: bad"),
        ("filled", ADOPTED_MESSAGE),
    ]
    with connect(path) as db:
        for index, (status, error) in enumerate(rows):
            db.execute(
                "INSERT INTO orders_fired (correlation_id, client_order_id, ticker, outcome_side,"
                " count, price_dollars, time_in_force, self_trade_prevention_type, status,"
                " error_message, requested_at_ms) VALUES ('c', ?, 'T', 'yes', '1.00', '0.5000',"
                " 'fill_or_kill', 'taker_at_cross', ?, ?, ?)",
                (f"r{index}", status, error, now_ms()),
            )
    document = run_stats(capsys, "--telemetry-db", path)
    assert document["orders_fired"]["reconciliation"] == {
        "reconciled": 2,
        "reconcile_failed": 1,
        "outcome_unknown": 2,
        "open": 2,
        "adopted": 1,
    }


# ---------------------------------------------------------------- filters


@pytest.fixture
def dated_db(tmp_path: Path) -> Path:
    """wake_recv rows 2 h old (duration 9.0) and 1 min old (durations 1.0 and 2.0)."""
    path = tmp_path / "t.db"
    make_db(path)
    insert_events(
        path,
        [
            ("wake_recv", now_ms() - 2 * HOUR_MS, 9.0, '{"dry_run": false}'),
            ("wake_recv", now_ms() - 60_000, 1.0, '{"dry_run": false}'),
            ("wake_recv", now_ms() - 60_000, 2.0, '{"dry_run": false}'),
            ("sign", now_ms() - 60_000, 0.5, None),
        ],
    )
    return path


@pytest.mark.parametrize(
    ("since", "kept"),
    [("15m", 2), ("1h", 2), ("3h", 3), ("90s", 2), ("1d", 3)],
)
def test_since_duration_keeps_the_window(
    capsys: pytest.CaptureFixture[str], dated_db: Path, since: str, kept: int
) -> None:
    """--since with a duration keeps only rows that started inside the window."""
    document = run_stats(capsys, "--telemetry-db", dated_db, "--since", since)
    assert row(document, "wake_recv", "all")["n"] == kept
    assert document["since_ms"] is not None


def test_since_iso_time(capsys: pytest.CaptureFixture[str], dated_db: Path) -> None:
    """--since with an ISO time (Z, an offset, or no zone meaning UTC) keeps rows from then on."""
    import datetime as dt

    moment = dt.datetime.fromtimestamp((now_ms() - HOUR_MS) / 1000, tz=dt.UTC)
    for text in (
        moment.isoformat().replace("+00:00", "Z"),
        moment.astimezone(dt.timezone(dt.timedelta(hours=2))).isoformat(),
        moment.replace(tzinfo=None).isoformat(),
    ):
        document = run_stats(capsys, "--telemetry-db", dated_db, "--since", text)
        assert row(document, "wake_recv", "all")["n"] == 2, text
        assert row(document, "wake_recv", "all")["max_ms"] == 2.0


def test_stage_filter(capsys: pytest.CaptureFixture[str], dated_db: Path) -> None:
    """--stage keeps one stage; the others are not reported."""
    document = run_stats(capsys, "--telemetry-db", dated_db, "--stage", "sign")
    assert {entry["stage"] for entry in document["latency"]} == {"sign"}
    assert row(document, "sign", "all")["n"] == 1


def test_filters_use_an_index_only_when_it_pays(dated_db: Path) -> None:
    """A filter keeping most rows bypasses its index (+column); a selective one uses it."""
    with contextlib.closing(sqlite3.connect(dated_db)) as db:
        assert latency_filter(db, None, "wake_recv").sql == " WHERE +stage = ?"
        assert latency_filter(db, None, "sign").sql == " WHERE +stage = ?"  # 1 of 4 > 20 %
        insert_events(dated_db, [("wake_recv", now_ms() - 3 * HOUR_MS, 1.0, None)] * 20)
        assert latency_filter(db, None, "sign").sql == " WHERE stage = ?"  # 1 of 24
        selective = latency_filter(db, now_ms() - 120_000, None)  # 3 of 24
        assert selective.sql == " WHERE started_at_ms >= ?"
        plan = " ".join(
            str(step[-1])
            for step in db.execute(
                "EXPLAIN QUERY PLAN SELECT duration_ms FROM latency_events" + selective.sql,
                selective.params,
            )
        )
        assert "idx_latency_events_started_at" in plan


# ---------------------------------------------------------------- read-only


def test_stats_never_changes_the_file(
    capsys: pytest.CaptureFixture[str], known_db: tuple[Path, dict[tuple[str, str], list[float]]]
) -> None:
    """The database's bytes and mtime are the same after stats as before."""
    path, _ = known_db
    with connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    run_stats(capsys, "--telemetry-db", path)
    assert stats_main(["--telemetry-db", os.fspath(path), "--since", "1h"]) == 0
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_stats_runs_while_a_writer_holds_a_transaction(
    capsys: pytest.CaptureFixture[str], dated_db: Path
) -> None:
    """A writer mid-transaction does not block stats, which sees only committed rows."""
    with connect(dated_db) as writer:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO correlations VALUES ('pending', 0)")
        writer.execute(
            "INSERT INTO latency_events (correlation_id, stage, started_at_ms, ended_at_ms,"
            " duration_ms) VALUES ('pending', 'wake_recv', ?, ?, 99.0)",
            (now_ms(), now_ms()),
        )
        document = run_stats(capsys, "--telemetry-db", dated_db)
        assert row(document, "wake_recv", "all")["n"] == 3
        writer.execute("COMMIT")
    document = run_stats(capsys, "--telemetry-db", dated_db)
    assert row(document, "wake_recv", "all")["n"] == 4


# ---------------------------------------------------------------- bad input


def assert_bad_input(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> None:
    """Exit 2, exactly one stderr line containing each needle, nothing on stdout."""
    with pytest.raises(SystemExit) if argv[:1] == ["--no-such-flag"] else contextlib.nullcontext():
        status = stats_main(argv)
        assert status == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""
    for needle in needles:
        assert needle in lines[0]


def test_missing_file_is_one_line_and_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A missing database is exit 2 with one line, and the file is not created."""
    missing = tmp_path / "missing.db"
    assert_bad_input(capsys, ["--telemetry-db", str(missing)], "no such file")
    assert not missing.exists()


def test_not_sqlite_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file that is not SQLite is exit 2 with one line, and it is left as it was."""
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a database\n" * 100)
    assert_bad_input(capsys, ["--telemetry-db", str(path)], "not an SQLite database")
    assert path.read_text() == "hello, this is not a database\n" * 100


def test_database_without_the_tables_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An SQLite file without latency_events is exit 2 with one line."""
    path = tmp_path / "other.db"
    with connect(path) as db:
        db.execute("CREATE TABLE unrelated (x)")
    assert_bad_input(capsys, ["--telemetry-db", str(path)], "no latency_events table")


def test_directory_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A directory given as the database is exit 2 with one line."""
    assert_bad_input(capsys, ["--telemetry-db", str(tmp_path)], "not a regular file")


def test_bad_since_is_one_line(capsys: pytest.CaptureFixture[str], dated_db: Path) -> None:
    """A --since that is neither a duration nor an ISO time is exit 2 with one line."""
    assert_bad_input(capsys, ["--telemetry-db", str(dated_db), "--since", "lunch"], "--since")


def test_unknown_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown flag is exit 2 with one line."""
    with pytest.raises(SystemExit) as leaving:
        stats_main(["--no-such-flag"])
    assert leaving.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "--no-such-flag" in lines[0]


def test_plot_without_matplotlib_is_one_line(
    capsys: pytest.CaptureFixture[str], dated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--plot without matplotlib installed says how to install it, exit 2, and writes nothing."""
    real_find_spec = importlib.util.find_spec

    def without_matplotlib(name: str, package: str | None = None) -> Any:
        return None if name == "matplotlib" else real_find_spec(name, package)

    monkeypatch.setattr(stats.importlib.util, "find_spec", without_matplotlib)
    png = dated_db.with_name("out.png")
    assert_bad_input(
        capsys, ["--telemetry-db", str(dated_db), "--plot", str(png)], "matplotlib", "[plot]"
    )
    assert not png.exists()


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], dated_db: Path) -> None:
    """--plot writes a PNG of the CDFs and the per-minute series (matplotlib installed)."""
    pytest.importorskip("matplotlib")
    png = dated_db.with_name("out.png")
    assert stats_main(["--telemetry-db", str(dated_db), "--plot", str(png)]) == 0
    capsys.readouterr()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_line_dispatches_stats(dated_db: Path) -> None:
    """``python -m executor stats`` runs this command (exit 0) and its bad input exits 2."""
    good = subprocess.run(
        [sys.executable, "-m", "executor", "stats", "--telemetry-db", str(dated_db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert "wake_recv" in good.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "executor", "stats", "--telemetry-db", str(dated_db) + ".nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1


def test_read_only_folder_falls_back_to_immutable(
    capsys: pytest.CaptureFixture[str], dated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the -shm cannot be made (read-only folder) and no -wal exists, stats reads immutably."""
    with connect(dated_db) as db:
        db.execute("PRAGMA journal_mode = DELETE")  # what a cleanly closed WAL file looks like
    assert not Path(f"{dated_db}-wal").exists()
    real_connect = stats_db._connect_and_probe
    uris: list[str] = []

    def read_only_folder(uri: str) -> sqlite3.Connection:
        uris.append(uri)
        if "immutable=1" not in uri:  # as root the folder's mode cannot stop SQLite: simulate
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(uri)

    monkeypatch.setattr(stats_db, "_connect_and_probe", read_only_folder)
    document = run_stats(capsys, "--telemetry-db", dated_db)
    assert row(document, "wake_recv", "all")["n"] == 3
    assert [("immutable=1" in uri) for uri in uris] == [False, True]


def test_unreadable_wal_is_one_line(
    capsys: pytest.CaptureFixture[str], dated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a -wal present, a failed open is reported, never read immutably (it would miss rows)."""
    Path(f"{dated_db}-wal").touch()

    def refuse(uri: str) -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(stats_db, "_connect_and_probe", refuse)
    assert_bad_input(capsys, ["--telemetry-db", str(dated_db)], "cannot read", "unable to open")
