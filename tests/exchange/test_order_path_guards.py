"""Order-path behaviours a mutation audit found unguarded (issue 15): one test per defect.

Each docstring names the defect its test fails on; each was checked by putting the defect in,
seeing the test fail, and taking it out again.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from executor.clock import wall_ms
from executor.config.sizing import SizingConfig
from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.follow.account import AccountState, poll_account_once
from executor.exchange.messages import (
    ExchangeError,
    ExchangeTimeout,
    OrderStamps,
    RetryPolicy,
    order_body,
)
from executor.exchange.orders.transport import ExchangeEndpoint, open_exchange
from executor.exchange.token_bucket import TokenBucket
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.fire.path import FireOutcome
from executor.recording.database import close_database, open_database
from executor.recording.rows import OrderRow, Stage
from executor.recording.sqlite_writer import write_batch
from executor.signer import HEADER_TIMESTAMP, KalshiSigner
from tests.support.inprocess import fake_endpoint, make_wake
from tests.support.order_fakes import FakePlacer, order_harness
from tests.support.orders import spec

ONE_CONTRACT = SizingConfig(kelly_fraction=0.0)
"""Every real fire sizes to one contract (no risk refusal for position size)."""

HELD_S = 0.2
"""How long a test holds an exchange answer (seconds)."""


def gate() -> RiskGate:
    """A risk gate with the default limits, shard 0 allowed."""
    return RiskGate(RiskLimits(), frozenset({0}))


def real_wake(correlation_id: str, **overrides: Any) -> Any:
    """A real wake on shard 0."""
    return make_wake(correlation_id, exchange_index=0, **overrides)


async def test_the_in_flight_count_comes_back_down_after_a_failed_or_cancelled_dispatch() -> None:
    """Guards against dispatch_finished running only on success: after a dispatch that raises,
    and after one that is cancelled, the gate's in-flight count is back to 0."""
    risk = gate()
    placer = FakePlacer([], error=ExchangeError("503 Service Unavailable", status=503))
    async with order_harness(placer=placer, risk=risk, sizing=ONE_CONTRACT) as harness:
        outcome = await harness.fire_path.fire(real_wake("fails"))
        assert outcome is FireOutcome.DISPATCH_ERROR
        assert risk.in_flight == 0
        placer.error = None
        placer.release = trio.Event()  # never set: the order hangs until cancelled
        with trio.move_on_after(0) as scope:
            scope.deadline = trio.current_time() + HELD_S
            await harness.fire_path.fire(real_wake("cancelled", market_ticker="KXOTHER-26-T1"))
        assert scope.cancelled_caught
        assert risk.in_flight == 0


async def test_a_refire_while_the_first_order_is_in_flight_meets_the_cooldown() -> None:
    """Guards against the attempt being recorded after the send: while the first order on a
    ticker and direction is still unanswered, a refire on them is refused by the cooldown."""
    risk = gate()
    placer = FakePlacer([], release=trio.Event())
    async with (
        order_harness(placer=placer, risk=risk, sizing=ONE_CONTRACT) as harness,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(harness.fire_path.fire, real_wake("first"))
        while not placer.bodies:
            await trio.lowlevel.checkpoint()
        second: FireOutcome | None = None
        # A refusal returns at once; a second order would hang on the held answer.
        with trio.move_on_after(HELD_S):
            second = await harness.fire_path.fire(real_wake("second"))
        assert placer.release is not None
        placer.release.set()
    assert second is FireOutcome.REFUSED_RISK
    assert [kind for kind, _ in placer.events].count("send") == 1


async def test_a_refused_real_fire_without_a_group_writes_null(tmp_path: Path) -> None:
    """Guards against a refused real fire with correlation_group="" writing "" instead of NULL:
    the rejected row carries None, and the database stores NULL."""
    async with order_harness(sizing=ONE_CONTRACT) as harness:
        # Half a contract resting at the level: the volume refusal, which writes its row.
        wake = real_wake("thin", correlation_group="", available_size_contracts=0.5)
        assert await harness.fire_path.fire(wake) is FireOutcome.REFUSED_VOLUME
    rows = [row for row in harness.sink.orders if isinstance(row, OrderRow)]
    assert [(row.status.value, row.correlation_group) for row in rows] == [("rejected", None)]
    db_path = tmp_path / "t.db"
    connection, _ = open_database(db_path)
    try:
        write_batch(connection, rows)  # type: ignore[arg-type]
        (stored,) = connection.execute("SELECT correlation_group IS NULL FROM orders_fired")
    finally:
        close_database(connection, db_path)
    assert stored == (1,)


FAST_RETRY = RetryPolicy(base_delay_s=0.0, max_delay_s=0.0)
"""Retries without a pause, so a test that counts attempts does not wait for the backoff."""


def _silent_endpoint(credentials: FakeCredentials, port: int) -> ExchangeEndpoint:
    """An endpoint on 127.0.0.1:``port`` signed with the fake's key and trusting its CA."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)
    return ExchangeEndpoint(
        f"https://127.0.0.1:{port}", credentials.key_id, signer, credentials.ca_file
    )


async def _silent_listener(nursery: trio.Nursery, accepted: list[trio.SocketStream]) -> int:
    """A TCP listener that accepts and never answers (a TLS handshake on it hangs); its port."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")

    async def hold(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        await trio.sleep_forever()

    nursery.start_soon(trio.serve_listeners, hold, listeners)
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def test_a_connect_timeout_is_a_timeout_tried_once(
    nursery: trio.Nursery, fake_credentials: FakeCredentials
) -> None:
    """Guards against a connect timeout on the order path being taken for a retryable connection
    error: it is an ExchangeTimeout after exactly one attempt and one connection, and it says the
    order never left (nothing to reconcile)."""
    accepted: list[trio.SocketStream] = []
    port = await _silent_listener(nursery, accepted)
    stamps = OrderStamps()
    endpoint = _silent_endpoint(fake_credentials, port)
    async with open_exchange(endpoint, prewarm=False, retry=FAST_RETRY) as client:
        with pytest.raises(ExchangeTimeout) as raised:
            await client.place_order(b"{}", stamps, dry_run=False)
    assert (len(accepted), stamps.attempts) == (1, 1)
    assert raised.value.maybe_placed is False


async def test_a_refused_connect_is_retried(fake_credentials: FakeCredentials) -> None:
    """The negative twin: a connect the exchange refuses is a connection error, retried up to
    the policy's attempts (nothing was sent), and it is not a timeout."""
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    stamps = OrderStamps()
    endpoint = _silent_endpoint(fake_credentials, port)
    async with open_exchange(endpoint, prewarm=False, retry=FAST_RETRY) as client:
        with pytest.raises(ExchangeError) as raised:
            await client.place_order(b"{}", stamps, dry_run=False)
    assert not isinstance(raised.value, ExchangeTimeout)
    assert stamps.attempts == FAST_RETRY.max_attempts


async def test_the_signed_timestamp_is_read_after_the_rate_limit_wait(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Guards against the timestamp being read before the rate-limit wait: with the bucket
    drained, the KALSHI-ACCESS-TIMESTAMP signed is at least the start plus the wait."""
    # 10 tokens an order, 50 a second: once drained, the next order waits 0.2 s for its tokens.
    bucket = TokenBucket(capacity=10, refill_per_s=10 / HELD_S)
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    async with open_exchange(endpoint, limiter=bucket) as client:
        # Read before the first order drains the bucket: its tokens are back no sooner than
        # HELD_S after this, however long that order's round trip takes on a loaded machine.
        started_ms = wall_ms()
        await client.place_order(order_body(spec("first", count=1)), OrderStamps(), dry_run=False)
        await client.place_order(order_body(spec("second", count=1)), OrderStamps(), dry_run=False)
    stamped = [
        int(request.headers[HEADER_TIMESTAMP.lower()])
        for request in fake_exchange.received
        if request.method == "POST"
    ]
    assert len(stamped) == 2
    # 5 ms for the millisecond rounding of both clocks and the refill credited before the wait.
    assert stamped[1] >= started_ms + HELD_S * 1000 - 5


async def test_the_bucket_keeps_first_come_first_served_as_time_passes(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Guards against the fast path ignoring queued waiters once time has passed: a request
    that arrives while an earlier one waits, after enough refill for itself but not for the
    earlier one, waits its turn instead of overtaking."""
    bucket = TokenBucket(capacity=20, refill_per_s=10)
    await bucket.acquire(20)
    served: list[str] = []

    async def take(name: str, tokens: float) -> None:
        await bucket.acquire(tokens)
        served.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, "first", 20)  # waits 2 s for 20 tokens
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(1.0)  # 10 tokens accrued: enough for the next caller alone
        nursery.start_soon(take, "second", 10)
        await trio.testing.wait_all_tasks_blocked()
        assert served == []
        mock_clock.jump(1.0)
        await trio.testing.wait_all_tasks_blocked()
        assert served == ["first"]
        mock_clock.jump(1.0)
    assert served == ["first", "second"]


async def test_stage_rows_are_anchored_when_their_spans_happened() -> None:
    """Guards against stage rows being stamped at recording time: with the answer held 0.2 s,
    order_build ends when the body was built, not when the rows were recorded after the ack."""
    placer = FakePlacer([], release=trio.Event())
    async with (
        order_harness(placer=placer, sizing=ONE_CONTRACT) as harness,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(harness.fire_path.fire, real_wake("anchored"))
        while not placer.bodies:
            await trio.lowlevel.checkpoint()
        await trio.sleep(HELD_S)
        assert placer.release is not None
        placer.release.set()
    ended = {row.stage: row.ended_at_ms for row in harness.sink.latency}
    assert ended[Stage.DISPATCH_ACK] - ended[Stage.ORDER_BUILD] >= HELD_S * 1000 - 5


class _RecordingGate:
    """Keeps what ``reconcile`` was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float], int]] = []

    def reconcile(self, positions: dict[str, float], as_of_ms: int) -> None:
        self.calls.append((dict(positions), as_of_ms))


class _SlowPositions:
    """An account whose positions answer arrives ``HELD_S`` after it was asked for."""

    def __init__(self) -> None:
        self.answered_at_ms = 0

    async def get_balance_cents(self) -> int:
        return 100_000

    async def get_positions(self) -> dict[str, float]:
        await trio.sleep(HELD_S)
        self.answered_at_ms = wall_ms()
        return {"KXTEST-26-T1": 3.0}


async def test_positions_are_reconciled_as_of_the_request_not_the_response() -> None:
    """Guards against stamping the reconciliation with the response time: the gate is told the
    moment the poll was issued, before the answer that came 0.2 s later."""
    account, risk = _SlowPositions(), _RecordingGate()
    issued_not_before_ms = wall_ms()
    ok = await poll_account_once(account, AccountState(), risk)  # type: ignore[arg-type]
    assert ok
    [(positions, as_of_ms)] = risk.calls
    assert positions == {"KXTEST-26-T1": 3.0}
    assert issued_not_before_ms <= as_of_ms <= account.answered_at_ms - HELD_S * 1000 + 5
