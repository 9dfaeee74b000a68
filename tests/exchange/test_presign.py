"""Signatures made ahead: fresh, used once, refilled, verified by the fake, never logged."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from executor.exchange.messages import ORDER_PATH, OrderSpec, OrderStamps, order_body
from executor.exchange.orders.presign import MAX_IDLE_WAIT_S, AsyncSign, SignaturePool
from executor.exchange.orders.shadow_lane import ShadowJob, ShadowLane
from executor.exchange.orders.sign_worker import open_process_signer
from executor.exchange.orders.stages import FireStamps
from executor.exchange.orders.transport import open_exchange
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.runtime.idle_loop import IDLE_CUSHION_S
from executor.signer import KalshiSigner
from tests.support.inprocess import fake_endpoint

WAIT_S = 30.0


def _body(number: int) -> bytes:
    spec = OrderSpec(
        "KXTEST", f"{number:032x}", "bid", 1, "0.4200", "fill_or_kill", "taker_at_cross", 0
    )
    return order_body(spec)


class Clock:
    """Wall-clock milliseconds that move only when the test says."""

    def __init__(self, now_ms: int = 1_800_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _counting_signer(made: list[str]) -> AsyncSign:
    async def sign(timestamp: str, method: str, path: str) -> str:
        await trio.lowlevel.checkpoint()
        made.append(f"{timestamp}|{method}|{path}")
        return f"sig-{len(made)}"

    return sign


async def _filled(pool: SignaturePool, nursery: trio.Nursery) -> None:
    """Start ``pool.run`` and wait until the pool is full."""
    await nursery.start(pool.run)
    with trio.fail_after(WAIT_S):
        while len(pool) < pool.size:
            # Idle, not a 1 ms poll: the spares are made on an idle loop, and a task waking
            # every millisecond keeps the loop from ever looking idle
            # (executor.runtime.idle_loop).
            await _pool_settled()


async def test_each_signature_is_for_post_and_the_order_path_and_used_once(
    nursery: trio.Nursery,
) -> None:
    """Every signature is for POST + the order path; takes hand out distinct ones, then none."""
    made: list[str] = []
    clock = Clock()
    pool = SignaturePool(_counting_signer(made), max_age_ms=100, size=4, reserve=0, clock=clock)
    await _filled(pool, nursery)
    assert all(entry.endswith("|POST|" + ORDER_PATH) for entry in made)
    taken = [pool.take() for _ in range(4)]  # no checkpoint: the refill cannot run in between
    assert pool.take() is None
    signatures = [item[1] for item in taken if item is not None]
    assert len(set(signatures)) == 4
    assert pool.taken == 4


async def test_a_signature_older_than_the_maximum_age_is_never_used(nursery: trio.Nursery) -> None:
    """At exactly the maximum age a signature is taken; one millisecond later none is."""
    clock = Clock()
    pool = SignaturePool(_counting_signer([]), max_age_ms=100, size=2, reserve=0, clock=clock)
    await _filled(pool, nursery)
    newest = max(int(timestamp) for timestamp in pool.ready_timestamps())
    clock.now_ms = newest + 100
    fresh = pool.take()
    assert fresh is not None and int(fresh[0]) == newest
    clock.now_ms = newest + 101
    assert pool.take() is None
    assert pool.expired >= 1


async def test_the_freshest_goes_to_a_real_fire_and_shadows_only_take_spares(
    nursery: trio.Nursery,
) -> None:
    """A real fire gets the newest signature; a shadow fire the oldest, never the reserve."""
    clock = Clock()
    pool = SignaturePool(_counting_signer([]), max_age_ms=100, size=4, reserve=2, clock=clock)
    await nursery.start(pool.run)
    while len(pool) < pool.size:
        clock.now_ms += 1  # distinct timestamps
        await trio.sleep(0.001)
    stamps = sorted(int(t) for t in pool.ready_timestamps())
    real = pool.take()
    assert real is not None and int(real[0]) == stamps[-1]
    spare = pool.take_spare()
    assert spare is not None and int(spare[0]) == stamps[0]
    assert pool.take_spare() is None  # two left: both reserved for real fires
    assert pool.take() is not None


async def test_the_pool_refills_after_takes(nursery: trio.Nursery) -> None:
    """Taken signatures are replaced in the background, up to the pool's size."""
    made: list[str] = []
    pool = SignaturePool(_counting_signer(made), max_age_ms=1000, size=3, reserve=0, clock=Clock())
    await _filled(pool, nursery)
    assert pool.take() is not None and pool.take() is not None
    assert len(pool) == 1
    with trio.fail_after(WAIT_S):
        while len(pool) < 3:
            await _pool_settled()
    assert pool.made == len(made) == 5


async def test_the_fake_verifies_every_presigned_order_and_nothing_is_logged(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Orders signed ahead in a worker process all verify at the fake; no log holds a signature."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S), capture_logs() as logs:
        async with (
            open_process_signer(
                fake_credentials.private_key_path, fake_credentials.key_id
            ) as worker,
            open_exchange(endpoint) as client,
        ):
            pool = SignaturePool(worker.sign, max_age_ms=2000, size=2, reserve=0)
            client.signatures = pool
            async with trio.open_nursery() as refill:
                await _filled(pool, refill)
                stamps = [OrderStamps() for _ in range(3)]
                for number, stamp in enumerate(stamps):
                    await client.place_order(_body(number), stamp, dry_run=False)
                refill.cancel_scope.cancel()
    orders = [r for r in fake_exchange.received if r.path == ORDER_PATH]
    assert len(orders) == 3 and all(r.verified and r.status == 201 for r in orders)
    assert [s.signature for s in stamps][:2] == ["presigned", "presigned"]
    assert client.presigned + client.signed_inline == 3 and client.presigned >= 2
    signatures = {r.headers["kalshi-access-signature"] for r in orders}
    assert not any(sig in repr(entry) for entry in logs for sig in signatures)


async def test_an_empty_pool_signs_inline(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """With no signature ready the order signs itself, says so, and still verifies."""
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)

    async def never(timestamp: str, method: str, path: str) -> str:
        raise AssertionError("an empty pool is not asked")

    stamps = OrderStamps()
    with trio.fail_after(WAIT_S):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            client.signatures = SignaturePool(never, max_age_ms=100)  # never run: empty
            await client.place_order(_body(1), stamps, dry_run=False)
            shadow = OrderStamps()
            await client.place_order(_body(2), shadow, dry_run=True)
    assert signer.key_id == fake_credentials.key_id
    assert stamps.signature == "inline" and shadow.signature == "inline"
    assert (client.presigned, client.signed_inline) == (0, 1)
    (order,) = [r for r in fake_exchange.received if r.path == ORDER_PATH]
    assert order.verified and order.status == 201


def test_a_pool_that_cannot_work_is_refused() -> None:
    """A zero age, an empty pool or a reserve larger than the pool is a ValueError."""
    sign = _counting_signer([])
    with pytest.raises(ValueError, match="signature pool"):
        SignaturePool(sign, max_age_ms=0)
    with pytest.raises(ValueError, match="signature pool"):
        SignaturePool(sign, size=0)
    with pytest.raises(ValueError, match="signature pool"):
        SignaturePool(sign, size=2, reserve=3)


async def test_a_shadow_fire_with_a_spare_signature_is_finished_in_the_offer(
    nursery: trio.Nursery, fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The lane finishes a shadow job at once while spares last, then queues; nothing is sent."""
    finished: list[int] = []
    with trio.fail_after(WAIT_S):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            pool = SignaturePool(_counting_signer([]), max_age_ms=1000, size=3, reserve=2)
            client.signatures = pool
            await _filled(pool, nursery)
            lane = ShadowLane(client, capacity=1, presigned=client.place_shadow_now)
            jobs = [
                ShadowJob(_body(n), FireStamps(), functools.partial(finished.append, n))
                for n in range(3)
            ]
            assert [lane.offer(job) for job in jobs] == [True, True, False]
    assert finished == [0]  # the first, at once; the second queued (capacity 1); the third refused
    first = jobs[0].stamps.order
    assert first.signature == "presigned" and first.sent_ns is not None
    assert jobs[1].stamps.order.sent_ns is None
    assert not [r for r in fake_exchange.received if r.path == ORDER_PATH]
    assert pool.taken_spare == 1 and len(pool) == 2


async def _pool_settled() -> None:
    """Return once the loop has been idle longer than a spare refill waits for (the pool's own
    idle wait, ``IDLE_CUSHION_S``, ends first and its refill runs)."""
    await trio.testing.wait_all_tasks_blocked(10 * IDLE_CUSHION_S)


async def test_refills_wait_while_a_presigned_order_is_in_flight(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """After a real fire's take the worker signs nothing until that order is done (the pool not
    being empty), so it does not compete with the order's round trip."""
    made: list[str] = []
    pool = SignaturePool(_counting_signer(made), max_age_ms=1000, size=2, reserve=0, clock=Clock())
    await nursery.start(pool.run)
    await _pool_settled()
    assert len(pool) == 2
    assert pool.take() is not None
    await _pool_settled()
    assert (len(made), pool.in_flight) == (2, 1)  # paused: one ready, one order in flight
    pool.order_done()
    await _pool_settled()
    assert (len(made), len(pool), pool.in_flight) == (3, 2, 0)


async def _keep_busy(until: trio.Event) -> None:
    """Stay runnable (a checkpoint at a time) until ``until`` is set: the loop is never idle."""
    while not until.is_set():
        await trio.lowlevel.checkpoint()


@contextlib.contextmanager
def _loop_kept_busy(nursery: trio.Nursery) -> Iterator[None]:
    """A task keeps the loop from ever being idle inside the block (``_keep_busy``)."""
    done = trio.Event()
    nursery.start_soon(_keep_busy, done)
    try:
        yield
    finally:
        done.set()


async def _until_pool_holds(pool: SignaturePool, count: int) -> None:
    """Pass through the scheduler (never idling it) until ``pool`` holds ``count`` signatures."""
    with trio.fail_after(WAIT_S):
        while len(pool) < count:
            await trio.lowlevel.checkpoint()


async def test_spare_refills_wait_for_an_idle_loop(nursery: trio.Nursery) -> None:
    """With the reserve for real fires intact, the spares shadow fires took are made again only
    once the loop has nothing to run: a burst's wakes keep it busy, and the worker's RSA would
    take their CPU."""
    made: list[str] = []
    pool = SignaturePool(
        _counting_signer(made),
        max_age_ms=100_000,
        size=4,
        reserve=2,
        clock=Clock(),
        max_idle_wait_s=WAIT_S,  # only an idle loop, not the bound, may start the refill here
    )
    await _filled(pool, nursery)
    with _loop_kept_busy(nursery):
        await trio.lowlevel.checkpoint()
        assert pool.take_spare() is not None and pool.take_spare() is not None
        for _ in range(2000):  # ~2,000 scheduler passes, none of them idle
            await trio.lowlevel.checkpoint()
        assert (len(made), len(pool)) == (4, 2)
    await _pool_settled()  # the loop idles: the pool's shorter idle wait ends first, twice
    assert (len(made), len(pool)) == (6, 4)


async def test_below_the_reserve_a_refill_does_not_wait_for_an_idle_loop(
    nursery: trio.Nursery,
) -> None:
    """Once real fires could find the pool empty, the refill starts however busy the loop is."""
    made: list[str] = []
    pool = SignaturePool(
        _counting_signer(made), max_age_ms=100_000, size=2, reserve=2, clock=Clock()
    )
    await _filled(pool, nursery)
    with _loop_kept_busy(nursery):
        assert pool.take() is not None and pool.take() is not None
        pool.order_done()
        pool.order_done()
        await _until_pool_holds(pool, 2)
    assert len(made) == 4


async def test_a_loop_that_never_idles_still_gets_its_spares(nursery: trio.Nursery) -> None:
    """The wait for an idle loop is bounded (MAX_IDLE_WAIT_S): a loop busy for longer is refilled
    anyway."""
    made: list[str] = []
    pool = SignaturePool(
        _counting_signer(made), max_age_ms=100_000, size=3, reserve=1, clock=Clock()
    )
    await _filled(pool, nursery)
    with _loop_kept_busy(nursery):
        assert pool.take_spare() is not None
        await _until_pool_holds(pool, 3)
    assert len(made) == 4


def test_the_idle_wait_ends_before_the_newest_signature_nears_its_age_limit() -> None:
    """The bound: zero below the reserve; else at most ``max_idle_wait_s`` (MAX_IDLE_WAIT_S by
    default), and over before the newest is within max_age_ms / size of too old."""
    clock = Clock()
    pool = SignaturePool(_counting_signer([]), max_age_ms=40, size=4, reserve=1, clock=clock)
    assert pool._idle_wait_s() == 0.0  # empty
    pool._ready.append((clock.now_ms, str(clock.now_ms), "sig"))
    assert pool._idle_wait_s() == pytest.approx(0.030)  # 40 - 10 - 0 ms
    clock.now_ms += 25
    assert pool._idle_wait_s() == pytest.approx(0.005)
    clock.now_ms += 10
    assert pool._idle_wait_s() == 0.0  # within 10 ms of its limit: refill now
    long_lived = SignaturePool(_counting_signer([]), max_age_ms=10_000, size=4, reserve=0)
    long_lived._ready.append((long_lived._clock(), "t", "sig"))
    assert long_lived._idle_wait_s() == MAX_IDLE_WAIT_S
