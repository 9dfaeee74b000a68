"""Resuming without the stream: ``executor group reset`` resets the group on the exchange and
signals the executor serving the database, which then sends again; without the signal (the reset
made on the exchange alone) the executor, deaf to ``order_group_updates``, stays halted.

An in-process executor with ``--stream off`` trades fill_or_kill orders against the fake exchange
over TLS; the fake's contracts limit triggers the group, heard from the next order's refusal.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import trio
from structlog.testing import capture_logs

from executor.config.settings import Settings
from executor.exchange.book.offline_reset import reset_on_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.signer import KalshiSigner
from executor.trading.factory import OrderPathFactory
from tests.service.test_audit_trail import WAIT_S, query
from tests.service.test_exchange_halts import fire_and_wait, halts_of, orders_sent, settings_for
from tests.support.inprocess import RunningServer, start_server


def streamless(exchange: FakeExchange, credentials: FakeCredentials) -> Settings:
    """The halts tests' settings (a group of two contracts) with the stream off."""
    settings = settings_for(exchange, credentials)
    return dataclasses.replace(
        settings, exchange=dataclasses.replace(settings.exchange, stream=False)
    )


async def halted(
    nursery: trio.Nursery, directory: Path, exchange: FakeExchange, credentials: FakeCredentials
) -> RunningServer:
    """A streamless executor whose group the fake triggered: three fills pass the limit, the
    fourth order is sent and refused (which is how the halt is heard), the fifth is refused
    before sending."""
    factory = OrderPathFactory(
        streamless(exchange, credentials), telemetry_db=directory / "t.db", kill_switch=None
    )
    running = await start_server(nursery, directory, order_path=factory)
    assert not running.server.statistics().stream_connected
    for number, name in enumerate(("one", "two", "three", "four"), start=1):
        await fire_and_wait(running, name, number)
    halts = halts_of(running)
    assert halts.group_tripped_by == "order refusal"
    await fire_and_wait(running, "five", 5)
    assert orders_sent(exchange) == 4
    return running


async def test_group_reset_tells_a_streamless_executor_and_the_next_fire_is_placed(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """``executor group reset`` resets the group and signals the running executor (this
    process): one INFO line, the halt cleared, and the next real fire is sent and fills."""
    running = await halted(nursery, short_dir, fake_exchange, fake_credentials)
    halts = halts_of(running)
    settings = streamless(fake_exchange, fake_credentials)
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    with capture_logs() as logs:
        assert await reset_on_exchange(settings, signer, running.db_path) == 0
        with trio.fail_after(WAIT_S):
            while halts.group_tripped:  # noqa: ASYNC110
                await trio.sleep(0.01)
    resumed = [line for line in logs if "real fires go out again" in line["event"]]
    assert [(line["event"], line["log_level"]) for line in resumed] == [
        ("order group reset by the operator: real fires go out again", "info")
    ]
    await fire_and_wait(running, "six", 6)
    assert orders_sent(fake_exchange) == 5
    await running.shutdown()
    last = query(running.db_path, "SELECT status FROM orders_fired WHERE correlation_id = 'six'")
    assert last == [("filled",)]
    assert running.server.statistics().order_group_triggered == 0


async def test_without_the_signal_a_streamless_executor_stays_halted(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
) -> None:
    """The group reset on the exchange alone (no signal): the executor never hears it, and the
    next real fire is refused before sending, a rejected row naming the group."""
    running = await halted(nursery, short_dir, fake_exchange, fake_credentials)
    (group_id,) = fake_exchange.order_groups.groups
    fake_exchange.order_groups.reset(group_id)
    await fire_and_wait(running, "six", 6)
    assert orders_sent(fake_exchange) == 4
    assert halts_of(running).group_tripped
    await running.shutdown()
    last = query(
        running.db_path,
        "SELECT status, error_message FROM orders_fired WHERE correlation_id = 'six'",
    )
    assert last == [("rejected", f"order group {group_id} triggered by the exchange")]
