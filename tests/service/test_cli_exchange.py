"""Subprocess tests of ``executor serve`` with an exchange: ``--exchange fake`` and its errors."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.clock import clock_domain
from tests.support.inprocess import make_wake
from tests.support.processes import (
    LATER_SERVER_KEYS,
    Spawner,
    assert_one_line_failure,
    exit_counters,
    request_all,
)


@pytest.fixture
def spawner(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Spawner]:
    """A process starter (killed at teardown) whose children see no stray KALSHI_* settings."""
    for name in list(os.environ):
        if name.startswith("KALSHI_"):
            monkeypatch.delenv(name)
    spawner = Spawner(short_dir)
    try:
        yield spawner
    finally:
        spawner.kill_all()


def test_fake_exchange_serve_writes_orders_and_stage_rows(
    spawner: Spawner, short_dir: Path
) -> None:
    """``--exchange fake`` with default settings: a real wake fills, sized from the in-process
    fake's $100 account (3 contracts), and a shadow wake leaves stage rows; SIGTERM exits 0."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    executor = spawner.serve(socket_path, db_path, "--exchange", "fake")
    same_clock = {"recv_ns": time.perf_counter_ns(), "clock_domain": clock_domain()}
    acks = request_all(
        socket_path,
        [
            make_wake("sub-real", exchange_index=0, **same_clock),
            make_wake("sub-shadow", exchange_index=0, dry_run=True, **same_clock),
        ],
    )
    assert [ack.status for ack in acks] == ["accepted", "accepted"]
    # No wait for the order: the shutdown grace lets the fire in flight finish and write its rows.
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    stderr = executor.stderr()
    assert "FAKE exchange" in stderr and "Traceback" not in stderr
    server, telemetry = exit_counters(executor.stderr_lines())
    assert server["fired"] == 2
    refused = sum(value for key, value in server.items() if key.startswith("refused_"))
    assert server["accepted"] - server["unacked"] == server["fired"] + refused
    assert telemetry["order_rows_written"] == 2  # pending + resolution
    assert server["presigned"] + server["signed_inline"] == 1  # the one real order's attempt
    keys = list(server)
    assert keys[keys.index("log_dropped") + 1 :] == list(LATER_SERVER_KEYS)  # newest last
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        orders = db.execute("SELECT correlation_id, status, count FROM orders_fired").fetchall()
        stages = db.execute(
            "SELECT correlation_id, stage FROM latency_events WHERE stage != 'wake_recv'"
        ).fetchall()
        beats = db.execute("SELECT process FROM heartbeats").fetchall()
    assert orders == [("sub-real", "filled", "3.00")]
    real_stages = ["order_build", "sign", "dispatch_send", "dispatch_ack", "detect_fire"]
    real_stages += ["dispatch_wire", "detect_wire", "wire_engine", "engine_ack"]
    assert sorted(stage for cid, stage in stages if cid == "sub-real") == sorted(real_stages)
    assert sorted(stage for cid, stage in stages if cid == "sub-shadow") == sorted(
        ["order_build", "sign", "dispatch_send", "detect_fire"]
    )
    assert beats == [(f"executor:{socket_path}",)]  # the instance: its socket


def test_no_exchange_serve_sends_nothing_and_says_so(spawner: Spawner, short_dir: Path) -> None:
    """Without an exchange it says so once, fires are counted, and only wake rows are written."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    executor = spawner.serve(socket_path, db_path)
    assert request_all(socket_path, [make_wake("plain")])[0].status == "accepted"
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert executor.stderr().count("no exchange configured") == 1
    server, telemetry = exit_counters(executor.stderr_lines())
    assert (server["fired"], telemetry["rows_written"], telemetry["order_rows_written"]) == (
        1,
        1,
        0,
    )


def test_bad_private_key_is_one_line(
    spawner: Spawner, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configured private key that is not a key stops start-up with one line, exit non-zero."""
    key = short_dir / "key.pem"
    key.write_text("not a key")
    monkeypatch.setenv("KALSHI_API_KEY_ID", "k")
    monkeypatch.setenv("KALSHI_PRIVATE_KEY_PATH", str(key))
    monkeypatch.setenv("KALSHI_ALLOWED_EXCHANGE_INDEXES", "0")
    run = spawner.run(
        "serve", "--socket", short_dir / "x.sock", "--telemetry-db", short_dir / "t.db"
    )
    assert_one_line_failure(run, "key.pem")
    assert not (short_dir / "x.sock").exists()


def test_prod_without_allow_is_refused_at_start(
    spawner: Spawner, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials for prod without KALSHI_ALLOW_PRODUCTION_ORDERS: one line, nothing listens."""
    key = short_dir / "key.pem"
    key.write_text("irrelevant: refused before the key is read")
    for name, value in {
        "KALSHI_ENVIRONMENT": "prod",
        "KALSHI_API_KEY_ID": "k",
        "KALSHI_PRIVATE_KEY_PATH": str(key),
        "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
    }.items():
        monkeypatch.setenv(name, value)
    run = spawner.run("serve", "--socket", short_dir / "x.sock")
    assert_one_line_failure(run, "KALSHI_ALLOW_PRODUCTION_ORDERS")
    assert not (short_dir / "x.sock").exists()
