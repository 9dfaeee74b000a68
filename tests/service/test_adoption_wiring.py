"""The assembled order path's adopter skips the orders its own intent journal holds.

``executor.trading.assembly`` hands the adopter ``journal.outstanding``: an order sent and not yet
committed must never get an "adopted" row beside the one its own fire is about to write. The
adopter's rule is tested on its own (tests/exchange/test_adoption.py); this is the wiring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from executor.exchange.follow.adoption import Adopter
from executor.exchange.follow.reconcile import CollectedRows
from executor.exchange.messages import order_body
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.trading import assembly
from tests.service.test_fire_e2e import start_trading
from tests.support.orders import spec
from tests.support.rows import order_row


async def test_an_order_the_journal_holds_is_not_adopted_until_its_record_settles(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our order on the exchange's book, its intent outstanding in the running executor's
    journal: a pass adopts nothing; once the journal's record settles (and still no row), the
    next pass adopts it."""
    built: list[Adopter] = []

    class Recorded(Adopter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(assembly, "Adopter", Recorded)
    running = await start_trading(nursery, short_dir, fake_exchange, fake_credentials)
    (adopter,) = built
    journal = running.server.telemetry.journal
    assert journal is not None
    ours = adopter.ids.mint()
    fake_exchange.place_order(order_body(spec(ours)))
    intent = order_row(client_order_id=ours)
    journal.append(intent)

    collected = CollectedRows()
    assert await adopter.adopt(collected) is not None
    assert collected.rows == [] and adopter.adopted == 0

    journal.settle([intent])
    assert await adopter.adopt(collected) is not None
    assert [row.client_order_id for row in collected.rows] == [ours]
    assert adopter.adopted == 1
    await running.shutdown()
