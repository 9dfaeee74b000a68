"""The fire path with an exchange, against in-test fakes: rows, statuses, refusals, shadow lane."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from executor.clock import clock_domain
from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.orders import dispatcher as dispatcher_module
from executor.exchange.orders import transport as transport_module
from executor.exchange.orders.connection import OrderConnection
from executor.exchange.orders.dispatcher import OrderPolicy, order_status
from executor.exchange.orders.transport import ExchangeError
from executor.fire.path import FireOutcome
from executor.recording.orders.terms import CANCELLED_AT_SHUTDOWN
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from executor.runtime.kill_switch import KillSwitch
from executor.wire.protocol import WakeMessage
from tests.support.inprocess import make_wake
from tests.support.order_fakes import FakePlacer, order_harness

WAIT_S = 5.0
"""Bound on any wait in these tests (seconds); nothing here should take a fraction of it."""


def wake(correlation_id: str = "c-1", **overrides: Any) -> WakeMessage:
    """A real wake on exchange shard 0 at 0.56 (the fake's funded shard)."""
    fields: dict[str, Any] = {"exchange_index": 0, "correlation_group": "grp"}
    fields.update(overrides)
    return make_wake(correlation_id, **fields)


def order_rows(rows: list[Any]) -> list[OrderRow]:
    """The order rows among ``rows`` (heartbeats left out)."""
    return [row for row in rows if isinstance(row, OrderRow)]


# ---------------------------------------------------------------- rows and statuses


@pytest.mark.parametrize(
    ("response", "time_in_force", "status"),
    [
        ({"order_id": "o", "fill_count": "3.00"}, "fill_or_kill", OrderStatus.FILLED),
        ({"order_id": "o", "fill_count": "0.00"}, "fill_or_kill", OrderStatus.CANCELED),
        ({"order_id": "o", "fill_count": "0.00"}, "good_till_canceled", OrderStatus.ACCEPTED),
        ({"order_id": "o", "fill_count": 0}, "immediate_or_cancel", OrderStatus.CANCELED),
        ({"order_id": "o"}, "fill_or_kill", OrderStatus.SUBMITTED),
        ({"order_id": "o", "fill_count": "n/a"}, "fill_or_kill", OrderStatus.SUBMITTED),
        ({}, "fill_or_kill", OrderStatus.SUBMITTED),
    ],
)
def test_status_follows_the_response(
    response: dict[str, Any], time_in_force: str, status: OrderStatus
) -> None:
    """No parseable fill_count is submitted; >0 filled; else accepted (GTC) or canceled."""
    assert order_status(response, time_in_force) is status


async def test_real_fire_writes_pending_then_resolution() -> None:
    """A filled real order leaves a pending row, then a resolution with the response verbatim."""
    placer = FakePlacer(
        [],
        response={
            "order_id": "k-9",
            "fill_count": "1.00",
            "remaining_count": "0.00",
            "average_fill_price": 0.56,
            "average_fee_paid": "0.0100",
        },
    )
    async with order_harness(placer=placer) as harness:
        outcome = await harness.fire_path.fire(wake("c-1"))
    assert outcome is FireOutcome.FIRED
    pending, resolution = order_rows(harness.sink.orders)
    assert (pending.kind, pending.status) == (OrderRowKind.PENDING, OrderStatus.PENDING)
    assert resolution.kind is OrderRowKind.RESOLUTION
    assert resolution.client_order_id == pending.client_order_id
    assert len(resolution.client_order_id) == 32
    assert resolution.status is OrderStatus.FILLED
    assert resolution.kalshi_order_id == "k-9"
    assert (resolution.fill_count, resolution.remaining_count) == ("1.00", "0.00")
    assert resolution.average_fill_price == "0.56"  # a bare number is stringified
    assert resolution.average_fee_paid == "0.0100"
    assert resolution.requested_at_ms == pending.requested_at_ms
    assert resolution.submitted_at_ms is not None and resolution.acknowledged_at_ms is not None
    assert (resolution.correlation_id, resolution.correlation_group) == ("c-1", "grp")
    assert (resolution.count, resolution.price_dollars) == ("1.00", "0.5600")
    assert resolution.post_only == 0
    [body] = placer.bodies
    assert orjson.loads(body)["client_order_id"] == resolution.client_order_id
    assert [kind for kind, _ in harness.events if kind in {"pending", "send", "order"}] == [
        "pending",
        "send",
        "order",
    ]


async def test_absent_fill_columns_are_null_and_empty_correlation_gets_an_id() -> None:
    """Fill columns the response lacks are NULL; a wake with no correlation id gets a fresh one."""
    async with order_harness(placer=FakePlacer([], response={"order_id": "k"})) as harness:
        await harness.fire_path.fire(wake("", correlation_group=""))
    _, resolution = order_rows(harness.sink.orders)
    assert resolution.status is OrderStatus.SUBMITTED
    assert resolution.fill_count is resolution.average_fee_paid is None
    assert len(resolution.correlation_id) == 32
    assert resolution.correlation_group is None
    assert all(row.correlation_id == "" for row in harness.sink.latency)


async def test_dropped_pending_row_still_gets_its_resolution() -> None:
    """When the pending row is dropped, the resolution row alone carries the order."""
    async with order_harness(drop_pending=True) as harness:
        await harness.fire_path.fire(wake())
    [resolution] = order_rows(harness.sink.orders)
    assert resolution.kind is OrderRowKind.RESOLUTION
    assert ("pending", resolution.client_order_id) in harness.events


async def test_exchange_error_resolves_as_error_and_is_counted() -> None:
    """A transport error writes an error row with its text, is counted, and does not raise."""
    placer = FakePlacer([], error=ExchangeError("429 rate_limited: slow down"))
    async with order_harness(placer=placer) as harness:
        with capture_logs() as logs:
            outcome = await harness.fire_path.fire(wake())
    assert outcome is FireOutcome.DISPATCH_ERROR
    _, resolution = order_rows(harness.sink.orders)
    assert resolution.status is OrderStatus.ERROR
    assert resolution.error_message == "429 rate_limited: slow down"
    assert resolution.acknowledged_at_ms is None
    counters = harness.fire_path.counters()
    assert (counters.fired, counters.dispatch_errors) == (1, 1)
    assert any(log["event"] == "dispatch failed" for log in logs)


async def test_cancelled_dispatch_resolves_as_cancelled_at_shutdown() -> None:
    """A dispatch cut by cancellation still queues its resolution row and its stage rows."""
    placer = FakePlacer([], release=trio.Event())  # never set: the order hangs
    async with order_harness(placer=placer) as harness:
        with trio.move_on_after(WAIT_S) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(harness.fire_path.fire, wake())
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
    _, resolution = order_rows(harness.sink.orders)
    assert (resolution.status, resolution.error_message) == (
        OrderStatus.ERROR,
        CANCELLED_AT_SHUTDOWN,
    )
    stages = [row.stage.value for row in harness.sink.latency]
    assert stages == ["order_build", "sign", "dispatch_send"]  # no ack: it never came


async def test_good_till_canceled_is_post_only() -> None:
    """post_only is 1 exactly for good_till_canceled, and the body says so too."""
    placer = FakePlacer([], response={"order_id": "k", "fill_count": "0.00"})
    policy = OrderPolicy(time_in_force="good_till_canceled", self_trade_prevention_type="maker")
    async with order_harness(placer=placer, policy=policy) as harness:
        await harness.fire_path.fire(wake())
    _, resolution = order_rows(harness.sink.orders)
    assert (resolution.post_only, resolution.status) == (1, OrderStatus.ACCEPTED)
    body = orjson.loads(placer.bodies[0])
    assert (body["post_only"], body["self_trade_prevention_type"]) == (True, "maker")


# ---------------------------------------------------------------- refusals


async def test_volume_refusal_writes_rejected_row_with_fixed_count() -> None:
    """A real fire sized below one contract is refused with a rejected row at the fixed count."""
    async with order_harness() as harness:
        outcome = await harness.fire_path.fire(wake(available_size_contracts=0.5))
    assert outcome is FireOutcome.REFUSED_VOLUME
    [row] = order_rows(harness.sink.orders)
    assert row.kind is OrderRowKind.REJECTED and row.status is OrderStatus.REJECTED
    assert row.error_message == "insufficient resting volume: 0.5 contracts at the level"
    assert (row.count, row.price_dollars, row.kalshi_order_id) == ("1.00", "0.5600", None)
    assert row.submitted_at_ms is None and row.post_only is None
    assert harness.placer.bodies == []
    counters = harness.fire_path.counters()
    assert (counters.fired, counters.refused_volume) == (0, 1)


async def test_kill_switch_writes_rejected_row(tmp_path: Path) -> None:
    """An engaged switch refuses a real fire with a rejected row naming the reason."""
    switch = KillSwitch(tmp_path / "halt", ttl_s=0)
    switch.engage("desk closed")
    async with order_harness(kill_switch=switch) as harness:
        outcome = await harness.fire_path.fire(wake())
        shadow = await harness.fire_path.fire(wake("s", dry_run=True))
    assert (outcome, shadow) == (FireOutcome.REFUSED_KILL_SWITCH, FireOutcome.FIRED)
    [row] = order_rows(harness.sink.orders)
    assert row.error_message == "kill switch engaged: desk closed"
    assert harness.fire_path.counters().refused_kill_switch == 1


async def test_risk_refusal_writes_rejected_row_and_nothing_is_sent() -> None:
    """A risk-gate refusal is a rejected row "risk gate: ..." and counted; nothing is sent."""
    risk = RiskGate(RiskLimits(), frozenset({0}))
    async with order_harness(risk=risk) as harness:
        outcome = await harness.fire_path.fire(wake(exchange_index=5))
    assert outcome is FireOutcome.REFUSED_RISK
    [row] = order_rows(harness.sink.orders)
    assert row.error_message == "risk gate: exchange_index=5 not in allowed [0]"
    assert harness.placer.bodies == []
    assert harness.fire_path.counters().refused_risk == 1


async def test_risk_gate_sees_the_attempt_and_in_flight_count() -> None:
    """The attempt is recorded before sending (a refire is in cooldown); in-flight returns to 0."""
    risk = RiskGate(RiskLimits(), frozenset({0}))
    release = trio.Event()
    placer = FakePlacer([], release=release)
    async with order_harness(placer=placer, risk=risk) as harness, trio.open_nursery() as nursery:
        nursery.start_soon(harness.fire_path.fire, wake("first"))
        await trio.testing.wait_all_tasks_blocked()
        assert risk.in_flight == 1
        release.set()
    assert risk.in_flight == 0
    async with order_harness(placer=FakePlacer([]), risk=risk) as again:
        assert await again.fire_path.fire(wake("second")) is FireOutcome.REFUSED_RISK
    [row] = order_rows(again.sink.orders)
    assert row.error_message is not None and "cooldown" in row.error_message


async def test_failed_or_cancelled_dispatch_still_counts_the_attempt_and_ends_in_flight() -> None:
    """A dispatch that raises or is cancelled leaves its attempt counted and nothing in flight."""
    risk = RiskGate(RiskLimits(), frozenset({0}))
    placer = FakePlacer([], error=ExchangeError("503 unavailable"))
    async with order_harness(placer=placer, risk=risk) as harness:
        assert await harness.fire_path.fire(wake("fails")) is FireOutcome.DISPATCH_ERROR
        assert risk.in_flight == 0
        refire = await harness.fire_path.fire(wake("refire"))
    assert refire is FireOutcome.REFUSED_RISK
    *_, row = order_rows(harness.sink.orders)
    assert row.error_message is not None and "cooldown" in row.error_message
    hung = FakePlacer([], release=trio.Event())  # never set: the order hangs
    async with order_harness(placer=hung, risk=risk) as harness, trio.open_nursery() as nursery:
        nursery.start_soon(harness.fire_path.fire, wake("hangs", direction="no"))
        await trio.testing.wait_all_tasks_blocked()
        assert risk.in_flight == 1
        nursery.cancel_scope.cancel()
    assert risk.in_flight == 0


async def test_a_fill_reaches_the_risk_gate() -> None:
    """The response's fill_count is fed to the gate: the next order would pass the position cap."""
    risk = RiskGate(RiskLimits(), frozenset({0}))  # at most 5 contracts on a ticker
    placer = FakePlacer([], response={"order_id": "k", "fill_count": "5.00"})
    async with order_harness(placer=placer, risk=risk) as harness:
        assert await harness.fire_path.fire(wake("fills")) is FireOutcome.FIRED
        # The other side of the same ticker is in no cooldown; only the position refuses it.
        other_side = await harness.fire_path.fire(wake("next", direction="no"))
    assert other_side is FireOutcome.REFUSED_RISK
    *_, row = order_rows(harness.sink.orders)
    assert row.error_message == (
        "risk gate: position on KXBTCD-26AUG2917-T112750 would reach 6 contracts (max 5)"
    )


@pytest.mark.parametrize("dry_run", [False, True])
async def test_prod_without_allow_refuses_before_minting(dry_run: bool) -> None:
    """Prod without KALSHI_ALLOW_PRODUCTION_ORDERS: nothing built, signed, sent or written."""
    policy = OrderPolicy(environment="prod", allow_production=False)
    async with order_harness(policy=policy) as harness:
        with capture_logs() as logs:
            outcome = await harness.fire_path.fire(wake(dry_run=dry_run))
    assert outcome is FireOutcome.REFUSED_PERMISSION
    assert harness.events == [] and harness.sink.latency == [] and harness.sink.orders == []
    counters = harness.fire_path.counters()
    assert (counters.fired, counters.refused_permission) == (0, 1)
    assert [log["event"] for log in logs] == ["fire_refused_permission"]


async def test_prod_with_allow_sends() -> None:
    """The twin: prod with the allow flag places the order."""
    policy = OrderPolicy(environment="prod", allow_production=True)
    async with order_harness(policy=policy) as harness:
        assert await harness.fire_path.fire(wake()) is FireOutcome.FIRED
    assert len(harness.placer.bodies) == 1


async def test_snapped_price_outside_the_book_is_refused() -> None:
    """A real price that snaps to 0.0 is a price refusal: no row, nothing sent ([ours])."""
    async with order_harness() as harness:
        outcome = await harness.fire_path.fire(wake(wire_price_yes_dollars=0.003))
    assert outcome is FireOutcome.REFUSED_PRICE
    assert harness.sink.orders == [] and harness.placer.bodies == []


# ---------------------------------------------------------------- stage rows


async def test_stage_rows_with_detect_fire_on_a_shared_clock() -> None:
    """A real fire on this clock domain writes all five stage rows, detect_fire directly."""
    message = wake(recv_ns=trio_perf_ns() - 1_000_000, clock_domain=clock_domain())
    async with order_harness() as harness:
        await harness.fire_path.fire(message)
    rows = {row.stage.value: row for row in harness.sink.latency}
    assert list(rows) == ["order_build", "sign", "dispatch_send", "dispatch_ack", "detect_fire"]
    assert all(row.metadata_json == '{"dry_run": false}' for row in rows.values())
    assert rows["detect_fire"].duration_ms >= 1.0
    assert all(row.ended_at_ms >= row.started_at_ms for row in rows.values())
    # Anchored when the span happened: detect_fire starts at recv, before the order was built.
    assert rows["detect_fire"].started_at_ms <= rows["order_build"].started_at_ms


@pytest.mark.parametrize(
    "overrides",
    [{"recv_ns": 0}, {"clock_domain": "elsewhere:0"}, {"clock_domain": ""}],
    ids=["no-recv", "other-domain", "no-domain"],
)
async def test_no_detect_fire_off_the_shared_clock(overrides: dict[str, Any]) -> None:
    """Without recv_ns or on another clock domain there is no detect_fire; the order still goes."""
    fields = {"recv_ns": trio_perf_ns(), "clock_domain": clock_domain(), **overrides}
    async with order_harness() as harness:
        await harness.fire_path.fire(wake(**fields))
    stages = [row.stage.value for row in harness.sink.latency]
    assert stages == ["order_build", "sign", "dispatch_send", "dispatch_ack"]
    assert len(harness.placer.bodies) == 1


def trio_perf_ns() -> int:
    """The perf counter the executor stamps with."""
    import time

    return time.perf_counter_ns()


# ---------------------------------------------------------------- shadow fires


async def test_shadow_fire_is_signed_in_the_lane_and_writes_no_order_row() -> None:
    """A shadow fire is signed, writes its four stage rows, and no order row; nothing is sent."""
    message = wake("sh", dry_run=True, recv_ns=trio_perf_ns(), clock_domain=clock_domain())
    async with order_harness() as harness:
        assert await harness.fire_path.fire(message) is FireOutcome.FIRED
    assert harness.sink.orders == [] and harness.placer.bodies == []
    assert [kind for kind, _ in harness.events if kind == "sign"] == ["sign"]
    assert [row.stage.value for row in harness.sink.latency] == [
        "order_build",
        "sign",
        "dispatch_send",
        "detect_fire",
    ]
    assert {row.metadata_json for row in harness.sink.latency} == {'{"dry_run": true}'}


async def test_full_lane_skips_shadow_fires_before_signing() -> None:
    """With the lane full a shadow fire is skipped: counted, order_build only, never signed."""
    async with order_harness(lane_capacity=1) as harness:
        # No checkpoint between these fires: the lane task cannot drain in between.
        first = await harness.fire_path.fire(wake("a", dry_run=True))
        second = await harness.fire_path.fire(wake("b", dry_run=True))
        assert (first, second) == (FireOutcome.FIRED, FireOutcome.SHADOW_SKIPPED)
        assert [row.stage.value for row in harness.sink.latency] == ["order_build"]
    counters = harness.fire_path.counters()
    assert (counters.fired, counters.shadow_skipped) == (2, 1)
    assert [kind for kind, _ in harness.events if kind == "sign"] == ["sign"]


async def test_real_fire_overtakes_a_burst_of_shadow_fires() -> None:
    """A real fire arriving while the lane signs a burst is sent before the burst is all signed.

    The real wake arrives the moment the lane signs its first shadow order; the lane signs one
    order per pass through the scheduler, so the real order goes out after at most one more. A
    lane that signed its whole queue in one go would send it last (the assertion's negative).
    """
    burst = 10
    async with order_harness() as harness, trio.open_nursery() as nursery:

        def real_wake_arrives() -> None:
            nursery.start_soon(harness.fire_path.fire, wake("real"))

        harness.placer.on_first_sign = real_wake_arrives
        with trio.fail_after(WAIT_S):
            for index in range(burst):
                assert await harness.fire_path.fire(wake(f"s{index}", dry_run=True)) is (
                    FireOutcome.FIRED
                )
            # The lane waits for an idle loop itself, so wait for its work, not for idleness.
            while harness.orders.lane.signed < burst or not harness.placer.bodies:  # noqa: ASYNC110
                await trio.sleep(0.001)
    kinds = [kind for kind, _ in harness.events if kind in {"sign", "send"}]
    assert kinds.count("sign") == burst and kinds.count("send") == 1
    assert kinds.index("send") <= 2, kinds
    assert harness.fire_path.counters().shadow_skipped == 0


# ---------------------------------------------------------------- build to send


ALLOWED_BETWEEN_BUILD_AND_SEND = {"stamp_ns", "OrderSpec", "order_body", "_spec", "wall_ms"}
"""Every call ``_build_and_start`` may make before handing the body to the transport."""

TRANSPORT_CALLS = {"_send_now", "place_order"}
"""How the body reaches the transport: written at once (``send_order_now``), or by the task."""


def _calls_and_names(*functions: Any) -> tuple[set[str], set[str]]:
    source = "\n".join(textwrap.dedent(inspect.getsource(function)) for function in functions)
    tree = ast.parse(source)
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.attr if isinstance(func, ast.Attribute) else ast.unparse(func))
    names = {ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return called, names


def test_nothing_touches_telemetry_between_build_and_send() -> None:
    """The build-to-send function (and the spec it builds) call only stamps, builder, transport."""
    dispatcher_class = dispatcher_module.OrderDispatcher
    called, names = _calls_and_names(dispatcher_class._build_and_start, dispatcher_class._spec)
    assert called - TRANSPORT_CALLS <= ALLOWED_BETWEEN_BUILD_AND_SEND, called
    assert "_send_now" in called
    assert not any(word in name for name in names for word in ("sink", "log", "telemetry"))


def test_the_transports_immediate_write_touches_no_telemetry_log_or_file() -> None:
    """What ``send_order_now`` runs before the write names no sink, log, telemetry or file."""
    client, connection = transport_module.ExchangeClient, OrderConnection
    called, names = _calls_and_names(
        client.send_order_now,
        client._begin_attempt,
        client._real_signature,
        connection.begin,
        connection._send_now,
        connection._wrote_all,
    )
    assert {"checkout_now", "try_acquire", "begin", "send"} <= called  # the check reads them
    forbidden = ("sink", "log", "telemetry", "record", "open", "write")
    assert not [name for name in names | called if any(word in name for word in forbidden)]


def test_the_structural_check_catches_a_log_call() -> None:
    """The negative twin: a log call slipped between build and send is something the check sees."""
    tree = ast.parse("async def f(self):\n    log.info('x')\n    await self.client.place_order()")
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert called - {"place_order"} - ALLOWED_BETWEEN_BUILD_AND_SEND == {"info"}


# ---------------------------------------------------------------- layering

LOWER_LAYERS_MUST_NOT_IMPORT = {
    "executor.decide.sizing": {
        "executor.telemetry",
        "executor.exchange.orders.transport",
        "executor.exchange.orders.dispatcher",
    },
    "executor.decide.risk": {
        "executor.telemetry",
        "executor.exchange.orders.transport",
        "executor.exchange.orders.dispatcher",
    },
    "executor.exchange.orders.stages": {
        "executor.fire.path",
        "executor.exchange.orders.dispatcher",
        "executor.telemetry",
    },
    "executor.exchange.orders.shadow_lane": {
        "executor.fire.path",
        "executor.trading.assembly",
        "executor.telemetry",
    },
    "executor.exchange.orders.dispatcher": {
        "executor.fire.path",
        "executor.trading.assembly",
        "executor.server",
    },
    "executor.decide.decision": {
        "executor.telemetry",
        "executor.exchange.orders.dispatcher",
        "executor.fire.path",
    },
    "executor.decide.prices": {
        "executor.telemetry",
        "executor.exchange.orders.dispatcher",
        "executor.fire.path",
    },
    "executor.decide.order_request": {
        "executor.fire.path",
        "executor.exchange.orders.dispatcher",
        "executor.telemetry",
    },
    "executor.exchange.follow.account": {
        "executor.fire.path",
        "executor.trading.assembly",
        "executor.server",
    },
    "executor.exchange.follow.reconcile": {
        "executor.telemetry",
        "executor.decide.risk",
        "executor.exchange.orders.dispatcher",
        "executor.fire.path",
    },
    "executor.exchange.follow.lookup": {
        "executor.telemetry",
        "executor.decide.risk",
        "executor.exchange.orders.dispatcher",
        "executor.exchange.follow.reconcile",
    },
    "executor.fire.path": {
        "executor.trading.assembly",
        "executor.server",
        "executor.exchange.orders.transport",
    },
}
"""Layers run one way (STYLE.md, "The order path"): what each order-path module may not import."""


def imported_modules(module_name: str) -> set[str]:
    """The ``executor`` modules a module imports at its top level or anywhere inside it."""
    path = Path(__file__).parents[2] / (module_name.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("executor")}


@pytest.mark.parametrize("module_name", sorted(LOWER_LAYERS_MUST_NOT_IMPORT))
def test_order_path_layers_import_one_way(module_name: str) -> None:
    """No order-path module imports a layer above it (the fire path, the assembly, the server)."""
    forbidden = LOWER_LAYERS_MUST_NOT_IMPORT[module_name]
    assert imported_modules(module_name) & forbidden == set()


def test_layer_check_sees_an_upward_import() -> None:
    """The negative twin: the assembly does import the fire path, and the check sees it."""
    assert "executor.fire.path" in imported_modules("executor.trading.assembly")
