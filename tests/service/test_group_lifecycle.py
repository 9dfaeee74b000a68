"""The order group's lifecycle: one group per installation, never a pile after refused starts.

In-process executors against the fake exchange over TLS; a second executor on the same database
is refused by the database's lock, which is checked before the group is made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.recording.database import TelemetryOpenError
from executor.server import ExecutorServer, ServerConfig
from executor.trading.factory import OrderPathFactory
from tests.service.test_audit_trail import query
from tests.service.test_book_guard import settings_for, start

REFUSED_STARTS = 5
"""Starts refused in a row, as a unit restarting on failure would make them."""


async def test_five_refused_starts_on_a_locked_database_create_no_group(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """One executor runs; a second on its database is refused five times (the lock): the fake
    still has exactly the first executor's group, and the database records only that one."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    (group_id,) = fake_exchange.order_groups.groups
    settings = settings_for(fake_exchange, fake_credentials)
    for attempt in range(REFUSED_STARTS):
        other = Path(tempfile.mkdtemp(dir=short_dir))
        factory = OrderPathFactory(settings, telemetry_db=running.db_path, kill_switch=None)
        server = ExecutorServer(
            ServerConfig(
                socket_path=other / "y.sock",
                telemetry_db=running.db_path,
                handle_signals=False,
                order_path=factory,
            )
        )
        refused: list[Exception] = []
        try:
            await server.run()
        except* TelemetryOpenError as group:
            refused.extend(group.exceptions)
        assert "another executor" in str(refused[0])
        assert list(fake_exchange.order_groups.groups) == [group_id], attempt
    await running.shutdown()
    assert query(running.db_path, "SELECT order_group_id FROM order_groups") == [(group_id,)]


async def test_a_restart_reuses_the_installations_group(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Stopped and started again on the same database, the executor puts its orders in the group
    it made the first time: one group on the fake, one row."""
    first = await start(nursery, short_dir, fake_exchange, fake_credentials)
    await first.shutdown()
    second = await start(nursery, short_dir, fake_exchange, fake_credentials)
    await second.shutdown()
    (group_id,) = fake_exchange.order_groups.groups
    assert query(second.db_path, "SELECT order_group_id FROM order_groups") == [(group_id,)]


async def test_a_group_the_exchange_no_longer_has_is_replaced(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The negative twin: the recorded group gone from the exchange (404), the next start makes
    a new one and records it beside the old."""
    first = await start(nursery, short_dir, fake_exchange, fake_credentials)
    await first.shutdown()
    (old_id,) = fake_exchange.order_groups.groups
    del fake_exchange.order_groups.groups[old_id]
    second = await start(nursery, short_dir, fake_exchange, fake_credentials)
    await second.shutdown()
    (new_id,) = fake_exchange.order_groups.groups
    assert new_id != old_id
    recorded = query(second.db_path, "SELECT order_group_id FROM order_groups ORDER BY rowid")
    assert recorded == [(old_id,), (new_id,)]
