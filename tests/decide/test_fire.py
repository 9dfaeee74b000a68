"""The fire path: price refusal, snap, kill switch, template cache and dispatch, in that order."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from executor.fire.path import (
    DEFAULT_CONTRACT_COUNT,
    FireCounters,
    FireOutcome,
    FirePath,
    FireRequest,
    OrderTemplate,
    Side,
    no_network_dispatcher,
)
from executor.runtime.kill_switch import KillSwitch
from executor.wire.protocol import Direction, WakeMessage

CENT = [[0.0, 1.0, 0.01]]
LADDER = [[0.0, 0.05, 0.001], [0.05, 0.95, 0.01], [0.95, 1.0, 0.001]]
UNTRADEABLE = [0.0, 1.0, -0.1, 1.5]


def wake(**overrides: Any) -> WakeMessage:
    """A valid real (not dry-run) wake at 0.56 on the cent grid, with ``overrides`` applied."""
    fields: dict[str, Any] = {
        "schema_version": 4,
        "correlation_id": "corr-1",
        "market_ticker": "KXBTC-26DEC31-B100000",
        "asset": "BTC",
        "direction": "yes",
        "kalshi_price": 0.55,
        "model_probability": 0.61,
        "fee": 0.01,
        "edge": 0.05,
        "decision_ts_ms": 1_700_000_000_000,
        "sent_at_ms": 1_700_000_000_001,
        "sent_at_ns": 123_456_789,
        "dry_run": False,
        "wire_price_yes_dollars": 0.56,
        "exchange_index": 2,
        "price_ranges": CENT,
        "correlation_group": "group-1",
    }
    fields.update(overrides)
    return WakeMessage(**fields)


class RecordingDispatcher:
    """A dispatcher that records every request it is handed."""

    def __init__(self) -> None:
        self.requests: list[FireRequest] = []

    async def __call__(self, request: FireRequest) -> None:
        self.requests.append(request)


class ForbiddenKillSwitch(KillSwitch):
    """A kill switch that fails the test if it is consulted."""

    def engaged_reason(self) -> str | None:
        raise AssertionError("the kill switch was consulted")


def engaged_switch(tmp_path: Path, reason: str = "ops halt") -> KillSwitch:
    """A kill switch, uncached, engaged with ``reason``."""
    switch = KillSwitch(tmp_path / "halt", ttl_s=0)
    switch.engage(reason)
    return switch


# 1. Untradeable price refusal.


@pytest.mark.parametrize("price", [*UNTRADEABLE, math.nan, math.inf, -math.inf])
async def test_real_fire_with_untradeable_price_is_refused(price: float) -> None:
    """A real fire whose price is not strictly inside (0, 1) is refused, counted and logged."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher)
    with capture_logs() as logs:
        outcome = await fire_path.fire(wake(wire_price_yes_dollars=price))
    assert outcome is FireOutcome.REFUSED_PRICE
    assert fire_path.counters() == FireCounters(fired=0, refused_price=1, refused_kill_switch=0)
    assert dispatcher.requests == []
    assert [(log["event"], log["log_level"]) for log in logs] == [("fire_refused_price", "warning")]
    assert logs[0]["correlation_id"] == "corr-1"


@pytest.mark.parametrize(
    ("price", "sent"), [(0.0, "0.0000"), (1.0, "1.0000"), (-0.1, "-0.1000"), (1.5, "1.5000")]
)
async def test_shadow_fire_with_untradeable_price_is_dispatched(price: float, sent: str) -> None:
    """A shadow fire is not price-checked: it is snapped and dispatched with dry_run set."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher)
    outcome = await fire_path.fire(wake(wire_price_yes_dollars=price, dry_run=True))
    assert outcome is FireOutcome.FIRED
    assert [(r.price, r.dry_run) for r in dispatcher.requests] == [(sent, True)]
    assert fire_path.counters() == FireCounters(fired=1, refused_price=0, refused_kill_switch=0)


@pytest.mark.parametrize(("price", "sent"), [(0.01, "0.0100"), (0.99, "0.9900")])
async def test_real_fire_just_inside_the_bounds_is_dispatched(price: float, sent: str) -> None:
    """The price refusal is strict on 0 and 1 only: prices just inside them fire."""
    dispatcher = RecordingDispatcher()
    outcome = await FirePath(dispatcher=dispatcher).fire(wake(wire_price_yes_dollars=price))
    assert outcome is FireOutcome.FIRED
    assert [r.price for r in dispatcher.requests] == [sent]


# 2. Snap to grid.


@pytest.mark.parametrize(
    ("price", "ranges", "sent"),
    [
        (0.564, CENT, "0.5600"),
        (0.566, CENT, "0.5700"),
        (0.0123, LADDER, "0.0120"),
        (0.9567, LADDER, "0.9570"),
        (0.5, [], "0.5000"),
        (0.375, [[0.0, 1.0, 0.25]], "0.5000"),  # 1.5 rounds to 2
        (0.625, [[0.0, 1.0, 0.25]], "0.5000"),  # 2.5 rounds to 2 (half to even); half away: 0.75
    ],
)
async def test_price_is_snapped_before_dispatch(
    price: float, ranges: list[list[float]], sent: str
) -> None:
    """The dispatched price is the snapped price with four decimals, rounding half to even."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher)
    await fire_path.fire(wake(wire_price_yes_dollars=price, price_ranges=ranges))
    assert [r.price for r in dispatcher.requests] == [sent]


@pytest.mark.parametrize(
    ("price", "ranges", "dry_run"),
    [
        (1e308, CENT, True),  # 1e308 / 0.01 overflows; round(inf) raises OverflowError
        (sys.float_info.max, [[0.0, sys.float_info.max, 3.0]], True),  # snaps to inf, no raise
        (0.5, [[0.0, 1.0, 1e-320]], False),  # a real fire with an absurd step
    ],
)
async def test_price_that_cannot_be_snapped_is_refused(
    price: float, ranges: list[list[float]], dry_run: bool
) -> None:
    """A fire whose price cannot be snapped to a finite number is refused as a price refusal."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher)
    with capture_logs() as logs:
        outcome = await fire_path.fire(
            wake(wire_price_yes_dollars=price, price_ranges=ranges, dry_run=dry_run)
        )
    assert outcome is FireOutcome.REFUSED_PRICE
    assert fire_path.counters().refused_price == 1
    assert dispatcher.requests == []
    assert [log["event"] for log in logs] == ["fire_refused_price"]


async def test_huge_but_snappable_shadow_price_is_dispatched() -> None:
    """A large finite shadow price that snaps to a finite number still fires."""
    dispatcher = RecordingDispatcher()
    outcome = await FirePath(dispatcher=dispatcher).fire(
        wake(wire_price_yes_dollars=1e6, dry_run=True)
    )
    assert outcome is FireOutcome.FIRED
    assert [r.price for r in dispatcher.requests] == ["1000000.0000"]


@settings(max_examples=300, deadline=None)
@given(
    price=st.floats(allow_nan=True, allow_infinity=True),
    step=st.floats(allow_nan=False, allow_infinity=False, min_value=0.0),
    dry_run=st.booleans(),
)
async def test_any_price_fires_or_is_refused_never_raises(
    price: float, step: float, dry_run: bool
) -> None:
    """For any price and step the fire path fires a finite price or refuses it; it never raises."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher)
    message = wake(
        wire_price_yes_dollars=price, price_ranges=[[-1e308, 1e308, step]], dry_run=dry_run
    )
    outcome = await fire_path.fire(message)
    assert outcome in (FireOutcome.FIRED, FireOutcome.REFUSED_PRICE)
    if outcome is FireOutcome.FIRED:
        assert math.isfinite(float(dispatcher.requests[0].price))
        assert dry_run or 0.0 < price < 1.0
    else:
        assert dispatcher.requests == []


# 3. Kill switch.


async def test_engaged_kill_switch_refuses_real_fire(tmp_path: Path) -> None:
    """A real fire while the switch is engaged is refused, counted, and logged with the reason."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher, kill_switch=engaged_switch(tmp_path, "ops halt"))
    with capture_logs() as logs:
        outcome = await fire_path.fire(wake())
    assert outcome is FireOutcome.REFUSED_KILL_SWITCH
    assert fire_path.counters() == FireCounters(fired=0, refused_price=0, refused_kill_switch=1)
    assert dispatcher.requests == []
    assert [(log["event"], log["log_level"], log["reason"]) for log in logs] == [
        ("fire_refused_kill_switch", "warning", "ops halt")
    ]


async def test_engaged_kill_switch_lets_shadow_fire_through(tmp_path: Path) -> None:
    """A shadow fire bypasses an engaged switch and is dispatched."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher, kill_switch=engaged_switch(tmp_path))
    outcome = await fire_path.fire(wake(dry_run=True))
    assert outcome is FireOutcome.FIRED
    assert len(dispatcher.requests) == 1
    assert fire_path.counters().refused_kill_switch == 0


async def test_shadow_fire_never_consults_the_switch(tmp_path: Path) -> None:
    """A shadow fire does not read the switch at all; a real fire does (its twin)."""
    fire_path = FirePath(kill_switch=ForbiddenKillSwitch(tmp_path / "halt"))
    assert await fire_path.fire(wake(dry_run=True)) is FireOutcome.FIRED
    with pytest.raises(AssertionError, match="consulted"):
        await fire_path.fire(wake(dry_run=False))


async def test_released_kill_switch_lets_real_fire_through(tmp_path: Path) -> None:
    """Once the switch is released, real fires are dispatched again."""
    switch = engaged_switch(tmp_path)
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher, kill_switch=switch)
    assert await fire_path.fire(wake()) is FireOutcome.REFUSED_KILL_SWITCH
    switch.release()
    assert await fire_path.fire(wake()) is FireOutcome.FIRED
    assert len(dispatcher.requests) == 1
    assert fire_path.counters() == FireCounters(fired=1, refused_price=0, refused_kill_switch=1)


async def test_price_refusal_comes_before_the_kill_switch(tmp_path: Path) -> None:
    """An untradeable real fire under an engaged switch counts as a price refusal."""
    fire_path = FirePath(kill_switch=engaged_switch(tmp_path))
    assert await fire_path.fire(wake(wire_price_yes_dollars=1.5)) is FireOutcome.REFUSED_PRICE
    assert fire_path.counters() == FireCounters(fired=0, refused_price=1, refused_kill_switch=0)


# 4. Order templates.


async def test_template_is_built_once_per_pair_and_reused() -> None:
    """Fires for one (market, direction) share one template object; a new pair builds a new one."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher)
    await fire_path.fire(wake(correlation_id="a"))
    await fire_path.fire(wake(correlation_id="b", wire_price_yes_dollars=0.3))
    assert fire_path.templates_built == 1
    first, second = dispatcher.requests
    assert first.template is second.template
    await fire_path.fire(wake(direction="no"))
    await fire_path.fire(wake(market_ticker="OTHER"))
    assert fire_path.templates_built == 3
    templates = [r.template for r in dispatcher.requests]
    assert templates[2] is not templates[0] and templates[3] is not templates[0]


@pytest.mark.parametrize(("direction", "side"), [("yes", "bid"), ("no", "ask")])
async def test_template_side_follows_direction(direction: Direction, side: Side) -> None:
    """A "yes" wake becomes a bid and a "no" wake an ask, at the YES-side price either way."""
    dispatcher = RecordingDispatcher()
    await FirePath(dispatcher=dispatcher).fire(
        wake(direction=direction, wire_price_yes_dollars=0.27)
    )
    (request,) = dispatcher.requests
    assert request.template == OrderTemplate("KXBTC-26DEC31-B100000", direction, side)
    assert request.price == "0.2700"


# 5. Dispatch.


@pytest.mark.parametrize("dry_run", [False, True])
async def test_dispatcher_receives_the_exact_request(dry_run: bool) -> None:
    """The dispatcher gets one request carrying the config's count and the wake's ids and flags."""
    dispatcher = RecordingDispatcher()
    fire_path = FirePath(dispatcher=dispatcher, contract_count=7)
    message = wake(
        correlation_id="c-42",
        correlation_group="g-9",
        exchange_index=5,
        dry_run=dry_run,
        wire_price_yes_dollars=0.4449,
    )
    assert await fire_path.fire(message) is FireOutcome.FIRED
    assert dispatcher.requests == [
        FireRequest(
            template=OrderTemplate("KXBTC-26DEC31-B100000", "yes", "bid"),
            price="0.4400",
            count=7,
            exchange_index=5,
            correlation_id="c-42",
            correlation_group="g-9",
            dry_run=dry_run,
        )
    ]
    assert fire_path.counters() == FireCounters(fired=1, refused_price=0, refused_kill_switch=0)


async def test_default_contract_count_is_used() -> None:
    """Without a configured count each request carries DEFAULT_CONTRACT_COUNT."""
    dispatcher = RecordingDispatcher()
    await FirePath(dispatcher=dispatcher).fire(wake())
    assert [r.count for r in dispatcher.requests] == [DEFAULT_CONTRACT_COUNT]


async def test_raising_dispatcher_propagates_after_fired_is_counted() -> None:
    """A dispatcher's exception reaches the caller unchanged, and the fire was already counted."""

    class PlacementError(Exception):
        pass

    async def failing_dispatcher(request: FireRequest) -> None:
        raise PlacementError(request.correlation_id)

    fire_path = FirePath(dispatcher=failing_dispatcher)
    with pytest.raises(PlacementError, match="corr-1"):
        await fire_path.fire(wake())
    assert fire_path.counters() == FireCounters(fired=1, refused_price=0, refused_kill_switch=0)


async def test_default_dispatcher_places_nothing_and_fires() -> None:
    """The default dispatcher completes at once, and a FirePath built with no arguments fires."""
    request = FireRequest(OrderTemplate("M", "yes", "bid"), "0.5000", 1, 0, "c", "", True)
    with trio.testing.assert_no_checkpoints():
        await no_network_dispatcher(request)
    fire_path = FirePath()
    assert await fire_path.fire(wake()) is FireOutcome.FIRED
    assert fire_path.counters().fired == 1


@pytest.mark.parametrize("count", [0, -1, True])
def test_contract_count_must_be_a_positive_integer(count: int) -> None:
    """A contract count below 1 (or a bool) is refused at construction."""
    with pytest.raises(ValueError, match="contract_count"):
        FirePath(contract_count=count)


async def test_counters_are_a_frozen_snapshot() -> None:
    """counters() returns an immutable value that later fires do not change."""
    fire_path = FirePath()
    snapshot = fire_path.counters()
    await fire_path.fire(wake())
    with pytest.raises(AttributeError, match="read-only"):
        snapshot.fired = 5
    assert snapshot == FireCounters()
    assert fire_path.counters() == FireCounters(fired=1)
