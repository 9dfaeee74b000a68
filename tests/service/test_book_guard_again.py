"""The book guard across engagements and resets (issue 36: behaviours no test guarded).

An in-process executor against the fake exchange over TLS, its kill switch a real file; the
fake's answers to a cancel or a reset are made to fail once by wrapping its ``_answer``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from executor.config.book import BookSettings
from executor.fake.book.account import error_body
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.runtime.kill_switch import KillSwitch
from tests.service.test_audit_trail import WAIT_S
from tests.service.test_book_guard import (
    guard_of,
    release_and_fire,
    rest_three,
    resting,
    start,
)


def fail_first(exchange: FakeExchange, monkeypatch: pytest.MonkeyPatch, path_end: str) -> list[int]:
    """Answer the first request whose path ends with ``path_end`` 503 (nothing done); the
    statuses the fake gave such requests, in order."""
    answer = exchange._answer
    statuses: list[int] = []

    async def failing(record: Any, fault: Any, stream: Any) -> tuple[int, bytes] | None:
        if not record.path.endswith(path_end):
            return await answer(record, fault, stream)
        if not statuses:
            statuses.append(503)
            return 503, error_body("service_unavailable", "try again")
        result = await answer(record, fault, stream)
        statuses.append(0 if result is None else result[0])
        return result

    monkeypatch.setattr(exchange, "_answer", failing)
    return statuses


async def wait_looks(running: Any, looks: int) -> None:
    """Wait until the guard has looked ``looks`` more times."""
    guard = guard_of(running)
    target = guard.looks + looks
    with trio.fail_after(WAIT_S):
        while guard.looks < target:  # noqa: ASYNC110
            await trio.sleep(0.02)


async def test_an_order_whose_cancel_failed_is_cancelled_at_the_next_engagement(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No group (only cancels act): the first engagement's batch cancel fails (503) and is not
    repeated while it lasts; released and engaged again, the three are cancelled."""
    book = BookSettings(order_group_contracts_limit=0)
    running = await start(nursery, short_dir, fake_exchange, fake_credentials, book=book)
    await rest_three(running, fake_exchange)
    statuses = fail_first(fake_exchange, monkeypatch, "/orders/batched")
    switch = KillSwitch(short_dir / "halt")
    switch.engage("first")
    await wait_looks(running, 3)
    assert (statuses, resting(fake_exchange), guard_of(running).cancels_failed) == ([503], 3, 3)
    switch.release()
    await wait_looks(running, 1)
    switch.engage("second")
    with trio.fail_after(WAIT_S):
        while resting(fake_exchange):  # noqa: ASYNC110
            await trio.sleep(0.02)
    await running.shutdown()
    assert statuses == [503, 200]


async def test_a_held_fire_waits_past_a_refused_first_reset_and_fills(
    nursery: trio.Nursery,
    short_dir: Path,
    fake_exchange: FakeExchange,
    fake_credentials: FakeCredentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The switch released and a real wake at once; the exchange refuses the first reset (503):
    the fire is held through that look and the next, which resets the group, and then fills
    (sent before, the exchange would reject it as an order of a triggered group)."""
    running = await start(
        nursery, short_dir, fake_exchange, fake_credentials, time_in_force="fill_or_kill"
    )
    resets = fail_first(fake_exchange, monkeypatch, "/reset")
    await release_and_fire(running, short_dir, fake_exchange)
    assert resets == [503, 200]
