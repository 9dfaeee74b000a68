"""Fires with nothing to await finish in the connection task; the rest get a task each."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel
import trio.testing

from executor.exchange.orders.shadow_lane import MAX_DEFER_S
from executor.fire.path import FireOutcome, FirePath, FireRequest
from executor.runtime.kill_switch import KillSwitch
from executor.wire.client import connect
from tests.support.inprocess import make_wake, start_server
from tests.support.order_fakes import order_harness

WAIT_S = 10.0
"""Bound on any wait in these tests (seconds); nothing here should take a fraction of it."""


class FireTaskCounter(trio.abc.Instrument):
    """Counts the tasks spawned to run ``ExecutorServer._fire``."""

    def __init__(self) -> None:
        self.fire_tasks = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("._fire"):
            self.fire_tasks += 1


async def test_shadow_fire_with_an_exchange_finishes_without_a_task() -> None:
    """A shadow fire is sized, built and offered to the lane synchronously; a real one is not."""
    async with order_harness() as harness:
        shadow = make_wake("s-1", dry_run=True, exchange_index=0)
        assert harness.fire_path.fire_now(shadow) is FireOutcome.FIRED
        assert harness.fire_path.counters().fired == 1
        real = make_wake("r-1", exchange_index=0)
        assert harness.fire_path.fire_now(real) is None
        assert harness.fire_path.counters().fired == 1  # nothing counted for the deferred fire
        with trio.fail_after(WAIT_S):
            assert await harness.fire_path.fire(real) is FireOutcome.FIRED
        assert harness.fire_path.counters().fired == 2
    assert [kind for kind, _ in harness.events if kind in {"sign", "send"}].count("send") == 1


def test_price_refusal_finishes_without_a_task() -> None:
    """A real fire priced outside (0, 1) is refused and counted by ``fire_now`` itself."""
    fire_path = FirePath()
    assert fire_path.fire_now(make_wake(wire_price_yes_dollars=1.5)) is FireOutcome.REFUSED_PRICE
    assert fire_path.counters().refused_price == 1


def test_no_exchange_default_dispatcher_finishes_without_a_task(short_dir: Any) -> None:
    """Without an exchange, the no-network dispatcher's fires and kill-switch refusals end here."""
    switch = KillSwitch(short_dir / "halt", ttl_s=0)
    fire_path = FirePath(kill_switch=switch)
    assert fire_path.fire_now(make_wake()) is FireOutcome.FIRED
    switch.engage("test")
    assert fire_path.fire_now(make_wake()) is FireOutcome.REFUSED_KILL_SWITCH
    assert fire_path.fire_now(make_wake(dry_run=True)) is FireOutcome.FIRED
    counters = fire_path.counters()
    assert (counters.fired, counters.refused_kill_switch) == (2, 1)


async def test_custom_dispatcher_still_gets_a_task() -> None:
    """A dispatcher that may await is never run inline: ``fire_now`` defers and counts nothing."""
    dispatched: list[FireRequest] = []

    async def dispatcher(request: FireRequest) -> None:
        await trio.lowlevel.checkpoint()
        dispatched.append(request)

    fire_path = FirePath(dispatcher=dispatcher)
    assert fire_path.fire_now(make_wake()) is None
    assert fire_path.counters().fired == 0 and not dispatched
    with trio.fail_after(WAIT_S):
        assert await fire_path.fire(make_wake()) is FireOutcome.FIRED
    assert len(dispatched) == 1


async def test_server_spawns_no_task_for_fires_with_nothing_to_await(
    nursery: trio.Nursery, short_dir: Any
) -> None:
    """Through the server: default fires spawn no fire task, a slow dispatcher's fires do."""
    counter = FireTaskCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        running = await start_server(nursery, short_dir)
        with trio.fail_after(WAIT_S):
            async with connect(running.socket_path) as client:
                for index in range(20):
                    ack = await client.request(make_wake(f"w-{index}", dry_run=index % 2 == 0))
                    assert ack.status == "accepted"
            await running.shutdown()
        assert running.server.statistics().fired == 20
        assert counter.fire_tasks == 0

        done: list[str] = []

        async def slow(request: FireRequest) -> None:
            await trio.lowlevel.checkpoint()
            done.append(request.correlation_id)

        other = short_dir / "other"
        other.mkdir()
        running = await start_server(nursery, other, fire_path=FirePath(dispatcher=slow))
        with trio.fail_after(WAIT_S):
            async with connect(running.socket_path) as client:
                for index in range(5):
                    await client.request(make_wake(f"s-{index}"))
            await running.shutdown()
        assert counter.fire_tasks == 5
        assert sorted(done) == [f"s-{index}" for index in range(5)]
    finally:
        trio.lowlevel.remove_instrument(counter)


async def test_shadow_lane_waits_for_an_idle_loop() -> None:
    """A queued shadow signature waits while another task keeps running (a burst), then goes."""
    async with order_harness() as harness:
        start = trio.current_time()
        signed_at: list[float] = []
        original = harness.placer.place_order

        async def timed_place_order(*args: Any, **kwargs: Any) -> dict[str, Any]:
            signed_at.append(trio.current_time())
            return await original(*args, **kwargs)

        harness.placer.place_order = timed_place_order  # type: ignore[method-assign]

        async def busy() -> None:  # stands in for connection tasks in a burst: always runnable
            for _ in range(300):
                await trio.lowlevel.checkpoint()
            harness.events.append(("busy", "done"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(busy)
            await trio.lowlevel.checkpoint()
            assert harness.fire_path.fire_now(make_wake("s-1", dry_run=True)) is FireOutcome.FIRED
        with trio.fail_after(WAIT_S):
            while not signed_at:  # noqa: ASYNC110 - waiting on the lane's own task
                await trio.sleep(0.001)
    kinds = [kind for kind, _ in harness.events]
    deferred_to_the_limit = signed_at[0] - start >= MAX_DEFER_S
    assert kinds.index("sign") > kinds.index("busy") or deferred_to_the_limit, kinds
