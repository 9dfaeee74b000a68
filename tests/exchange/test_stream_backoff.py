"""The stream's reconnect backoff: 0.5 s doubling to 30 s, jittered into [half, all] of that,
and back to 0.5 s once a connection has been trusted. Pinned on the pure schedule and on
``serve_stream`` itself, whose attempts are timed on Trio's virtual clock (no real waiting)."""

from __future__ import annotations

import itertools
import ssl
from typing import cast

import pytest
import trio
import trio.testing

import executor.exchange.stream.client as stream_module
from executor.exchange.halts import ExchangeHalts
from executor.exchange.stream.client import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    StreamDown,
    StreamEndpoint,
    reconnect_delay_s,
    serve_stream,
)
from executor.exchange.stream.orders import StreamedOrders
from executor.exchange.stream.state import StreamState

NOMINAL_S = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
"""The wait after the 1st, 2nd, ... failure in a row, before jitter."""


def test_the_schedule_doubles_from_half_a_second_to_thirty() -> None:
    """With the largest jitter the waits are 0.5, 1, 2, ... s, capped at 30 s; with none, half
    of each; any jitter in between lands inside those bounds."""
    assert (BACKOFF_FIRST_S, BACKOFF_MAX_S) == (0.5, 30.0)
    failures = range(1, len(NOMINAL_S) + 1)
    assert [reconnect_delay_s(n, 1.0) for n in failures] == NOMINAL_S
    assert [reconnect_delay_s(n, 0.0) for n in failures] == [s / 2 for s in NOMINAL_S]
    for n, nominal in zip(failures, NOMINAL_S, strict=True):
        for jitter in (0.1, 0.5, 0.999):
            assert nominal / 2 < reconnect_delay_s(n, jitter) < nominal
    assert reconnect_delay_s(60, 0.999) < BACKOFF_MAX_S  # no overflow far past the cap


class Orders:
    """The two things ``serve_stream`` asks of the stream's orders: trusted, and untrust."""

    def __init__(self) -> None:
        self.trusted = False

    def untrust(self) -> None:
        self.trusted = False


@pytest.mark.parametrize("jitter", [0.0, 0.999])
async def test_serve_stream_waits_the_schedule_and_resets_once_trusted(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, jitter: float
) -> None:
    """Ten connections fail in a row (the ninth after it was trusted): the gaps between the
    attempts, on the virtual clock, are the schedule scaled by the jitter, and the attempts after
    the trusted one start the schedule again."""
    orders = Orders()
    attempts: list[float] = []
    trusted_attempt = 9

    async def connection(
        endpoint: StreamEndpoint,
        streamed: StreamedOrders,
        state: StreamState,
        halts: ExchangeHalts | None,
    ) -> None:
        attempts.append(trio.current_time())
        if len(attempts) == trusted_attempt:
            orders.trusted = True  # subscribed and reconciled, then lost
        if len(attempts) > trusted_attempt + 1:
            await trio.sleep_forever()
        raise StreamDown("refused")

    monkeypatch.setattr(stream_module, "_connection", connection)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    endpoint = StreamEndpoint("wss://x/trade-api/ws/v2", "k", lambda *_: "", context)
    state = StreamState()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_stream(
                endpoint,
                cast(StreamedOrders, orders),
                state,
                jitter=lambda: jitter,
                task_status=task_status,
            )
        )
        while len(attempts) <= trusted_attempt + 1:
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    gaps = [after - before for before, after in itertools.pairwise(attempts)]
    scale = 0.5 + jitter / 2
    expected = [*NOMINAL_S, NOMINAL_S[0], NOMINAL_S[1]]  # reset after the trusted ninth
    assert gaps == pytest.approx([s * scale for s in expected])
    assert state.failures == trusted_attempt + 1 and state.connected == 0
