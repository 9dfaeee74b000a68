"""An order in flight when the audit database stops taking writes ends in its row once the
database is back (issue 21, item 4).

The executor runs in-process against the fake exchange; the outage is SQLite's own error path
(``tests/service/test_audit_trail.py``'s triggers, toggled from another connection). The fake
holds the order's answer until the outage has begun, so the resolution meets a database that
refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from executor.fake.exchange import ORDER_PATH, FakeCredentials, FakeExchange
from executor.wire.client import connect
from tests.service.test_audit_trail import WAIT_S, query, set_fault, start, wake
from tests.support.inprocess import RunningServer


def hold_order_answers(exchange: FakeExchange, monkeypatch: pytest.MonkeyPatch) -> trio.Event:
    """Make the fake place (and fill) an order at once but hold its answer until the returned
    event is set: the order is on the exchange's book before the outage begins (and before the
    outage triggers the order group, which would reject an order placed after it)."""
    release = trio.Event()
    answer = exchange._answer

    async def held(record: Any, fault: Any, stream: Any) -> tuple[int, bytes] | None:
        answered = await answer(record, fault, stream)
        if record.path == ORDER_PATH:
            await release.wait()
        return answered

    monkeypatch.setattr(exchange, "_answer", held)
    return release


async def through_an_outage(running: RunningServer, release: trio.Event) -> None:
    """One real order: its pending row committed, then writes fail, then the exchange fills it,
    then writes resume; returns once its row says ``filled``."""
    telemetry = running.server.telemetry
    db_path = running.db_path
    async with connect(running.socket_path) as client:
        with trio.fail_after(WAIT_S):
            assert (await client.request(wake("in-flight"))).status == "accepted"
            while telemetry.statistics().order_rows_written < 1:  # noqa: ASYNC110 - the pending
                await trio.sleep(0.01)
            await trio.to_thread.run_sync(set_fault, db_path, True)
            while telemetry.audit_available:  # noqa: ASYNC110 - the next heartbeat fails
                await trio.sleep(0.01)
            release.set()  # the exchange's answer (the order filled) reaches the executor now
            while telemetry.statistics().order_rows_kept < 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
            assert query(db_path, "SELECT status FROM orders_fired") == [("pending",)]
            await trio.to_thread.run_sync(set_fault, db_path, False)
            while query(db_path, "SELECT status FROM orders_fired") != [  # noqa: ASYNC110
                ("filled",)
            ]:
                await trio.sleep(0.02)


async def test_an_order_in_flight_when_writes_fail_gets_its_row_when_they_resume(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pending row committed, then the database refuses writes, then the exchange fills the
    order: its resolution is kept (not dropped) and, once writes succeed again, the row says
    ``filled`` with the exchange's order id; the trail's return runs an adoption pass."""
    release = hold_order_answers(fake_exchange, monkeypatch)
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    with capture_logs() as logs:
        await through_an_outage(running, release)
        with trio.fail_after(WAIT_S):  # the trail's return asked for an adoption pass
            while not any(entry["event"] == "adoption pass" for entry in logs):  # noqa: ASYNC110
                await trio.sleep(0.01)
    await running.shutdown()
    (order,) = fake_exchange.book.values()
    assert query(
        running.db_path, "SELECT correlation_id, kalshi_order_id, fill_count FROM orders_fired"
    ) == [("in-flight", order.order_id, "1.00")]
    final = running.server.telemetry.statistics()
    assert final.order_rows_dropped == 0 and final.order_rows_owed == 0
    assert final.audit_outages == 1
