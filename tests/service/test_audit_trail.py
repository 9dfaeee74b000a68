"""No audit trail, no trading: while order rows cannot be written, real fires are refused.

An in-process executor trades against the fake exchange over TLS. The write failure is SQLite's
own error path: triggers on ``orders_fired`` and ``heartbeats`` abort every insert while a flag row
says so (the tests run as root, which no file mode stops), toggled from another connection as a
disk that fills and then frees would be.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import trio
from structlog.testing import capture_logs

from executor.clock import clock_domain
from executor.config.settings import ExchangeSettings, Settings
from executor.config.sizing import SizingConfig
from executor.decide.risk import RiskLimits
from executor.fake.exchange import ORDER_PATH, FakeCredentials, FakeExchange
from executor.trading.factory import OrderPathFactory
from executor.wire.client import connect
from executor.wire.protocol import WakeMessage
from tests.support.inprocess import RunningServer, make_wake, start_server

WAIT_S = 20.0
"""Bound on each wait for the writer or the exchange (seconds), on a loaded two-core machine."""

HEARTBEAT_S = 0.1
"""The heartbeat interval here (seconds): a heartbeat that is written ends the outage."""

FAULT_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS fault (active INTEGER NOT NULL)",
    "INSERT INTO fault VALUES (0)",
    *(
        f"CREATE TRIGGER IF NOT EXISTS full_{table}_{event} BEFORE {event} ON {table}"
        " WHEN (SELECT active FROM fault) BEGIN SELECT RAISE(ABORT, 'database or disk is full');"
        " END"
        for table in ("orders_fired", "heartbeats")
        for event in ("INSERT", "UPDATE")
    ),
)


def set_fault(db_path: Path, active: bool) -> None:
    """Make every order and heartbeat write fail (or succeed again) from another connection."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10.0, isolation_level=None)) as db, db:
        for statement in FAULT_SCHEMA:
            db.execute(statement)
        db.execute("UPDATE fault SET active = ?", (int(active),))


def query(db_path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of one query against the executor's database (closed whatever the query raises:
    Python 3.13 warns of a connection left to the garbage collector, and the suite makes
    warnings errors)."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return db.execute(sql).fetchall()


def wake(correlation_id: str, **overrides: Any) -> WakeMessage:
    """A real wake on shard 0, on this host's clock, for a market of its own (no cooldown)."""
    fields: dict[str, Any] = {
        "exchange_index": 0,
        "recv_ns": time.perf_counter_ns(),
        "clock_domain": clock_domain(),
        "market_ticker": f"KXAUDIT-26JAN01-{correlation_id.upper()}",
    }
    fields.update(overrides)
    return make_wake(correlation_id, **fields)


async def start(
    nursery: trio.Nursery, directory: Path, exchange: FakeExchange, credentials: FakeCredentials
) -> RunningServer:
    """An in-process executor trading one contract per order against ``exchange``."""
    settings = Settings(
        exchange=ExchangeSettings(
            mode="real",
            base_url=exchange.base_url,
            key_id=credentials.key_id,
            private_key_path=credentials.private_key_path,
            ca_file=credentials.ca_file,
            shadow_signing="loop",
        ),
        sizing=SizingConfig(kelly_fraction=0.0),
        risk_enabled=True,
        risk_limits=RiskLimits(),
        allowed_exchange_indexes=frozenset({0}),
    )
    factory = OrderPathFactory(settings, telemetry_db=directory / "t.db", kill_switch=None)
    factory.heartbeat_interval_s = HEARTBEAT_S
    return await start_server(nursery, directory, order_path=factory)


def orders_received(exchange: FakeExchange) -> int:
    """Order requests the fake has received."""
    return sum(request.path == ORDER_PATH for request in exchange.received)


async def test_failing_writes_halt_real_fires_until_a_write_succeeds(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Audit writes failing mid-run: a real fire is refused with "audit trail unavailable"
    (counted, its would-be row logged at ERROR, nothing sent), a shadow fire still runs and
    writes its stage rows, and once a heartbeat is written again real fires are sent again."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    telemetry = running.server.telemetry
    db_path = running.db_path
    with capture_logs() as logs:
        async with connect(running.socket_path) as client:
            with trio.fail_after(WAIT_S):
                assert (await client.request(wake("before"))).status == "accepted"
                while telemetry.statistics().order_rows_written < 2:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                await trio.to_thread.run_sync(set_fault, db_path, True)
                while telemetry.audit_available:  # noqa: ASYNC110 - the next heartbeat fails
                    await trio.sleep(0.01)
                sent_before = orders_received(fake_exchange)
                assert (await client.request(wake("halted"))).status == "accepted"
                assert (await client.request(wake("shadow", dry_run=True))).status == "accepted"
                while running.server.statistics().refused_audit < 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                assert orders_received(fake_exchange) == sent_before  # nothing sent while halted
                assert telemetry.statistics().audit_unavailable == 1
                await trio.to_thread.run_sync(set_fault, db_path, False)
                while not telemetry.audit_available:  # noqa: ASYNC110 - the next heartbeat
                    await trio.sleep(0.01)
                assert (await client.request(wake("after"))).status == "accepted"
                while telemetry.statistics().order_rows_written < 4:  # noqa: ASYNC110
                    await trio.sleep(0.01)
    await running.shutdown()
    statistics = running.server.statistics()
    assert (statistics.fired, statistics.refused_audit) == (3, 1)  # before, shadow, after
    final = telemetry.statistics()
    assert (final.audit_outages, final.audit_unavailable) == (1, 0)
    refused = [entry for entry in logs if entry["event"].startswith("real fire refused")]
    assert [(entry["log_level"], entry["row"]["correlation_id"]) for entry in refused] == [
        ("error", "halted")
    ]
    assert refused[0]["row"]["status"] == "rejected"
    assert refused[0]["row"]["error_message"] == "audit trail unavailable"
    outage = [entry for entry in logs if entry["event"].startswith("audit trail")]
    assert [(entry["log_level"], entry["event"].split(":")[0]) for entry in outage] == [
        ("error", "audit trail unavailable"),
        ("warning", "audit trail available again"),
    ]
    orders = query(db_path, "SELECT correlation_id, status FROM orders_fired ORDER BY id")
    assert orders == [("before", "filled"), ("after", "filled")]
    shadow_stages = query(
        db_path, "SELECT stage FROM latency_events WHERE correlation_id = 'shadow'"
    )
    assert ("order_build",) in shadow_stages and ("sign",) in shadow_stages


async def test_without_write_failures_real_fires_are_never_refused_for_the_audit_trail(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The same fires with every write succeeding: all sent, none refused, no outage."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    async with connect(running.socket_path) as client:
        for sent, name in enumerate(("one", "two", "three"), start=1):
            assert (await client.request(wake(name))).status == "accepted"
            with trio.fail_after(WAIT_S):  # one at a time: the gate allows two in flight
                while running.server.telemetry.statistics().order_rows_written < 2 * sent:  # noqa: ASYNC110
                    await trio.sleep(0.01)
    await running.shutdown()
    assert running.server.statistics().refused_audit == 0
    assert running.server.telemetry.statistics().audit_outages == 0
