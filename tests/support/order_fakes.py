"""In-test stand-ins for the exchange client and telemetry, and a fire path wired to them.

The fakes keep one shared event list, so a test can assert the order in which the fire path built,
queued, signed, sent and recorded things without reading a clock.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio

from executor.clock import clock_domain
from executor.config.sizing import SizingConfig
from executor.decide.risk import RiskGate
from executor.exchange.follow.account import AccountState
from executor.exchange.orders.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.orders.shadow_lane import SHADOW_LANE_CAPACITY, ShadowLane
from executor.exchange.orders.stages import PerfToWall
from executor.exchange.orders.transport import OrderStamps
from executor.fire.path import FirePath, OrderPath
from executor.recording.orders.intent_journal import RecordFields, decode_record, frame_record
from executor.recording.rows import HeartbeatRow, LatencyRow, OrderRow
from executor.runtime.kill_switch import KillSwitch


@dataclass
class FakePlacer:
    """An ``ExchangeClient`` stand-in: stamps like the transport, answers what it is told.

    A real order appends ``("send", client_order_id)`` once its ``sent`` stamp is taken, then
    waits on ``release`` (when set) before answering ``response`` or raising ``error``. A shadow
    order appends ``("sign", client_order_id)`` and returns ``{}`` after its ``sent`` stamp.
    """

    events: list[tuple[str, str]]
    response: dict[str, Any] = field(default_factory=lambda: {"order_id": "o-1"})
    error: Exception | None = None
    release: trio.Event | None = None
    bodies: list[bytes] = field(default_factory=list)
    on_first_sign: Callable[[], None] | None = None

    async def place_order(
        self, body: bytes, stamps: OrderStamps, *, dry_run: bool, started: object = None
    ) -> dict[str, Any]:
        assert started is None  # it has no send_order_now, so nothing was begun for it
        stamps.attempts += 1
        client_order_id = orjson.loads(body)["client_order_id"]
        stamps.sign_start_ns = time.perf_counter_ns()
        stamps.sign_end_ns = time.perf_counter_ns()
        stamps.sent_ns = time.perf_counter_ns()
        if dry_run:
            self.events.append(("sign", client_order_id))
            if self.on_first_sign is not None:
                hook, self.on_first_sign = self.on_first_sign, None
                hook()
            return {}
        self.events.append(("send", client_order_id))
        self.bodies.append(body)
        if self.release is not None:
            await self.release.wait()
        else:
            await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error
        stamps.ack_ns = time.perf_counter_ns()
        return dict(self.response)

    async def get_balance_cents(self) -> int:
        return 100_000

    async def get_positions(self) -> dict[str, float]:
        return {}


@dataclass
class StartingPlacer(FakePlacer):
    """A :class:`FakePlacer` that, like the transport, can write a real order without waiting.

    ``send_order_now`` appends ``("send", client_order_id)`` at once (stamping ``sent`` and
    ``wire``) and hands back a marker; ``place_order(..., started=marker)`` then only answers.
    ``can_start`` False makes it refuse (as the transport does with no idle connection).
    """

    can_start: bool = True

    def send_order_now(self, body: bytes, stamps: OrderStamps) -> Any:
        if not self.can_start:
            return None
        stamps.attempts += 1
        stamps.sign_start_ns = stamps.sign_end_ns = time.perf_counter_ns()
        stamps.sent_ns = stamps.wire_ns = time.perf_counter_ns()
        self.events.append(("send", orjson.loads(body)["client_order_id"]))
        self.bodies.append(body)
        return self

    async def place_order(
        self, body: bytes, stamps: OrderStamps, *, dry_run: bool, started: object = None
    ) -> dict[str, Any]:
        if started is None:
            return await super().place_order(body, stamps, dry_run=dry_run)
        assert started is self and not dry_run
        await trio.lowlevel.checkpoint()
        stamps.ack_ns = time.perf_counter_ns()
        return dict(self.response)


@dataclass
class RecordingSink:
    """A ``Telemetry`` stand-in that keeps every row (and logs each call in ``events``)."""

    events: list[tuple[str, str]]
    latency: list[LatencyRow] = field(default_factory=list)
    orders: list[OrderRow | HeartbeatRow] = field(default_factory=list)
    drop_pending: bool = False

    def record(self, row: LatencyRow) -> None:
        self.events.append(("stage", row.stage.value))
        self.latency.append(row)

    intent_error: OSError | None = None
    """Set to make the intent record fail (the journal's disk is full)."""
    intents: list[OrderRow] = field(default_factory=list)

    def record_intent(self, fields: RecordFields) -> None:
        if self.intent_error is not None:
            raise self.intent_error
        row = decode_record(frame_record(fields)[:-1])  # the row the journal would give back
        self.events.append(("intent", row.client_order_id))
        self.intents.append(row)

    def record_pending(self, row: OrderRow) -> None:
        self.events.append(("pending", row.client_order_id))
        if not self.drop_pending:
            self.orders.append(row)

    async def record_order(self, row: OrderRow | HeartbeatRow, *, timeout_s: float = 2.0) -> None:
        await trio.lowlevel.checkpoint()
        self.events.append(("order", getattr(row, "status", "heartbeat")))
        self.orders.append(row)


@dataclass
class Harness:
    """A fire path with an exchange, its fakes, and its running shadow lane."""

    fire_path: FirePath
    placer: FakePlacer
    sink: RecordingSink
    events: list[tuple[str, str]]
    orders: OrderPath


@asynccontextmanager
async def order_harness(
    *,
    placer: FakePlacer | None = None,
    policy: OrderPolicy | None = None,
    risk: RiskGate | None = None,
    kill_switch: KillSwitch | None = None,
    sizing: SizingConfig | None = None,
    lane_capacity: int = SHADOW_LANE_CAPACITY,
    drop_pending: bool = False,
) -> AsyncIterator[Harness]:
    """Yield a :class:`Harness` whose shadow lane runs until the block ends."""
    events: list[tuple[str, str]] = placer.events if placer is not None else []
    placer = placer or FakePlacer(events)
    sink = RecordingSink(events, drop_pending=drop_pending)
    orders = OrderPath(
        dispatcher=OrderDispatcher(placer, sink, policy or OrderPolicy()),
        sink=sink,
        lane=ShadowLane(placer, lane_capacity),
        sizing=sizing or SizingConfig(),
        risk=risk,
        account=AccountState(),
        clock=PerfToWall(),
        clock_domain=clock_domain(),
    )
    fire_path = FirePath(kill_switch=kill_switch, orders=orders)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(orders.lane.run)
        try:
            yield Harness(fire_path, placer, sink, events, orders)
        finally:
            orders.lane.close()
