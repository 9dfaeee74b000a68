"""The exchange's own halts heard by a running executor: its order group triggered by the
fake's contracts limit, a trading pause; refused before sending, one line, one command resumes.

An in-process executor trades fill_or_kill orders against the fake exchange over TLS, with the
stream on (``order_group_updates`` is how the trigger and the reset are heard).
"""

from __future__ import annotations

from pathlib import Path

import trio
from structlog.testing import capture_logs

from executor.config.book import BookSettings
from executor.config.settings import Settings
from executor.exchange.book.offline_reset import reset_on_exchange
from executor.exchange.halts import ExchangeHalts
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.fire.path import OrderPath
from executor.runtime.kill_switch import KillSwitch
from executor.signer import KalshiSigner
from executor.trading.factory import OrderPathFactory
from executor.wire.client import connect
from tests.service.test_audit_trail import WAIT_S, query, wake
from tests.service.test_book_guard import guard_of, rest_three, resting
from tests.service.test_book_guard import settings_for as book_guard_settings
from tests.service.test_book_guard import start as start_with_switch
from tests.support.inprocess import RunningServer, start_server

ORDER = "/trade-api/v2/portfolio/events/orders"
GROUP_LIMIT = 2
"""Contracts per 15 s the group allows: the third one-contract fill triggers it."""


def settings_for(exchange: FakeExchange, credentials: FakeCredentials) -> Settings:
    """One contract per fill_or_kill order, a group of ``GROUP_LIMIT``, the stream on."""
    book = BookSettings(order_group_contracts_limit=GROUP_LIMIT)
    return book_guard_settings(exchange, credentials, time_in_force="fill_or_kill", book=book)


async def start(
    nursery: trio.Nursery, directory: Path, exchange: FakeExchange, credentials: FakeCredentials
) -> RunningServer:
    """An in-process executor against ``exchange``, its stream connected before it returns."""
    factory = OrderPathFactory(
        settings_for(exchange, credentials), telemetry_db=directory / "t.db", kill_switch=None
    )
    running = await start_server(nursery, directory, order_path=factory)
    with trio.fail_after(WAIT_S):
        while not running.server.statistics().stream_connected:  # noqa: ASYNC110
            await trio.sleep(0.01)
    return running


def order_path(running: RunningServer) -> OrderPath:
    """The running executor's order path."""
    orders = running.server.fire_path.orders
    assert orders is not None
    return orders


def halts_of(running: RunningServer) -> ExchangeHalts:
    """The running executor's halts."""
    halts = order_path(running).halts
    assert halts is not None
    return halts


def orders_sent(exchange: FakeExchange) -> int:
    """Order requests the fake received."""
    return sum(request.path == ORDER for request in exchange.received)


async def fire_and_wait(running: RunningServer, name: str, rows: int) -> None:
    """One real wake, then wait until ``orders_fired`` holds ``rows`` rows (its end included)."""
    async with connect(running.socket_path) as client:
        assert (await client.request(wake(name))).status == "accepted"
    sql = "SELECT COUNT(*) FROM orders_fired WHERE status != 'pending'"
    with trio.fail_after(WAIT_S):
        while query(running.db_path, sql) != [(rows,)]:  # noqa: ASYNC110
            await trio.sleep(0.02)


async def test_the_fakes_contracts_limit_halts_real_fires_until_group_reset(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Three one-contract fills pass the group's limit of two: the fake triggers the group, the
    executor hears it on the stream and refuses the next two real fires before sending (rejected
    rows naming the group, refused_order_group=2, order_group_triggered=1, one WARNING); after
    ``executor group reset`` the reset is heard back and the next fire fills."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    halts = halts_of(running)
    with capture_logs() as logs:
        for number, name in enumerate(("one", "two", "three"), start=1):
            await fire_and_wait(running, name, number)
        with trio.fail_after(WAIT_S):
            while not halts.group_tripped:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert halts.group_tripped_by == "stream"
        sent = orders_sent(fake_exchange)
        assert sent == 3
        for number, name in enumerate(("four", "five"), start=4):
            await fire_and_wait(running, name, number)
        assert orders_sent(fake_exchange) == sent  # refused before sending
        statistics = running.server.statistics()
        assert (statistics.refused_order_group, statistics.order_group_triggered) == (2, 1)
        assert (statistics.refused_risk, statistics.dispatch_errors) == (0, 0)
    (group_id,) = fake_exchange.order_groups.groups
    rejected = query(
        running.db_path,
        "SELECT correlation_id, error_message FROM orders_fired WHERE status = 'rejected'",
    )
    why = f"order group {group_id} triggered by the exchange"
    assert rejected == [("four", why), ("five", why)]
    halt_lines = [line for line in logs if line["log_level"] == "warning"]
    assert [line["event"] for line in halt_lines] == [
        "the exchange triggered this executor's order group: real fires are refused until it "
        "is reset"
    ]
    settings = settings_for(fake_exchange, fake_credentials)
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    assert await reset_on_exchange(settings, signer, running.db_path) == 0
    with trio.fail_after(WAIT_S):
        while halts.group_tripped:  # noqa: ASYNC110
            await trio.sleep(0.01)
    await fire_and_wait(running, "six", 6)
    assert orders_sent(fake_exchange) == sent + 1
    await running.shutdown()
    last = query(running.db_path, "SELECT status FROM orders_fired WHERE correlation_id = 'six'")
    assert last == [("filled",)]
    assert running.server.statistics().order_group_triggered == 0


async def test_a_pause_read_at_start_up_refuses_real_fires_before_sending(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The fake paused before the executor starts: the status read at start-up says so, and a
    real fire is refused before sending (a rejected row naming the pause and its resume time,
    refused_paused=1, trading_paused=1, no risk refusal)."""
    fake_exchange.set_pause("trading", "2026-12-10T10:00:00Z")
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    assert halts_of(running).paused
    await fire_and_wait(running, "paused", 1)
    assert orders_sent(fake_exchange) == 0
    statistics = running.server.statistics()
    assert (statistics.refused_paused, statistics.trading_paused) == (1, 1)
    assert (statistics.refused_risk, statistics.dispatch_errors) == (0, 0)
    await running.shutdown()
    rows = query(running.db_path, "SELECT status, error_message FROM orders_fired")
    why = "trading paused by the exchange (estimated resume 2026-12-10T10:00:00Z)"
    assert rows == [("rejected", why)]


async def test_a_pause_refusal_rereads_the_status_and_the_poll_resumes_fires(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """A pause begins after start-up: the first order is sent and refused (its body says trading
    is paused), which re-reads the status at once, so the second is refused before sending; the
    pause lifted, the paused-interval poll hears it and the third fills."""
    running = await start(nursery, short_dir, fake_exchange, fake_credentials)
    halts = halts_of(running)
    fake_exchange.set_pause("trading")
    await fire_and_wait(running, "first", 1)
    with trio.fail_after(WAIT_S):
        while not halts.paused:  # noqa: ASYNC110
            await trio.sleep(0.01)
    await fire_and_wait(running, "second", 2)
    assert orders_sent(fake_exchange) == 1
    fake_exchange.set_pause(None)
    with trio.fail_after(WAIT_S):
        while halts.paused:  # noqa: ASYNC110
            await trio.sleep(0.05)
    await fire_and_wait(running, "third", 3)
    await running.shutdown()
    rows = query(running.db_path, "SELECT correlation_id, status FROM orders_fired ORDER BY id")
    assert [row for row in rows if row[1] != "pending"] == [
        ("first", "error"),
        ("second", "rejected"),
        ("third", "filled"),
    ]
    statistics = running.server.statistics()
    assert (statistics.refused_paused, statistics.dispatch_errors) == (1, 1)


async def test_the_switchs_cancels_go_out_in_a_trading_pause_and_wait_out_an_exchange_pause(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """Three orders rest; the exchange paused (heard from an order's refusal): the engaged
    switch sends no cancel while it lasts; the pause turned into a trading pause (cancels
    allowed) and read by the poll, the three are cancelled."""
    book = BookSettings(cancel_order_on_pause=False)  # the orders rest on through the pause
    running = await start_with_switch(
        nursery, short_dir, fake_exchange, fake_credentials, book=book
    )
    await rest_three(running, fake_exchange)
    halts = halts_of(running)
    fake_exchange.set_pause("exchange")
    await fire_and_wait(running, "refused", 4)  # its 400 says paused: the status is read
    with trio.fail_after(WAIT_S):
        while halts.exchange_active:  # noqa: ASYNC110
            await trio.sleep(0.01)
    KillSwitch(short_dir / "halt").engage("operator halt")
    guard = guard_of(running)
    looked = guard.looks
    with trio.fail_after(WAIT_S):
        while guard.looks < looked + 3:  # noqa: ASYNC110
            await trio.sleep(0.02)
    assert resting(fake_exchange) == 3
    assert not any(request.method == "DELETE" for request in fake_exchange.received)
    fake_exchange.set_pause("trading")
    with trio.fail_after(WAIT_S):
        while resting(fake_exchange):  # noqa: ASYNC110
            await trio.sleep(0.05)
    await running.shutdown()
    assert running.server.statistics().cancels_sent == 3
