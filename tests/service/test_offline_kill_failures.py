"""``executor killswitch engage --telemetry-db`` run alone: a refused cancel or a failed group
trigger is exit status 1 (issue 36: neither was guarded by a test).

An in-process executor rests three good_till_canceled orders on the fake and stops; the exchange
half of the engage then runs in-process against the same fake and database.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from executor.exchange.book.offline_kill import engage_on_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.signer import KalshiSigner
from tests.service.test_book_guard import rest_three, resting, settings_for, start


async def rested_and_stopped(
    nursery: trio.Nursery, directory: Path, exchange: FakeExchange, credentials: FakeCredentials
) -> Path:
    """Three orders resting on the fake, the executor that placed them stopped; its database."""
    running = await start(nursery, directory, exchange, credentials)
    await rest_three(running, exchange)
    await running.shutdown()
    return running.db_path


async def engage(exchange: FakeExchange, credentials: FakeCredentials, db_path: Path) -> int:
    """The exchange half of an engage against ``exchange``; its exit status."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)
    return await engage_on_exchange(settings_for(exchange, credentials), signer, db_path, "test")


async def test_everything_done_exits_0(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The twin of the two below: every cancel and the trigger go through, exit 0."""
    db_path = await rested_and_stopped(nursery, short_dir, fake_exchange, fake_credentials)
    assert await engage(fake_exchange, fake_credentials, db_path) == 0
    assert resting(fake_exchange) == 0
    assert "triggered" in capsys.readouterr().out


async def test_a_refused_cancel_exits_1(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One of the three is no longer resting on the exchange (its cancel is answered with an
    error): the other two are cancelled, the group triggered, and the exit status is 1 with a
    line saying an order was not cancelled."""
    db_path = await rested_and_stopped(nursery, short_dir, fake_exchange, fake_credentials)
    fake_exchange.cancel_resting(next(iter(fake_exchange.book)))
    assert await engage(fake_exchange, fake_credentials, db_path) == 1
    assert "1 orders were not cancelled" in capsys.readouterr().err


async def test_a_failed_group_trigger_exits_1(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The recorded group gone from the exchange (the trigger answered 404): the cancels go
    through, and the exit status is 1 with a line saying the group was not triggered."""
    db_path = await rested_and_stopped(nursery, short_dir, fake_exchange, fake_credentials)
    fake_exchange.order_groups.groups.clear()
    assert await engage(fake_exchange, fake_credentials, db_path) == 1
    assert resting(fake_exchange) == 0
    assert "could not be triggered" in capsys.readouterr().err
