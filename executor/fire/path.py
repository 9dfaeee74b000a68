"""The fire path: what happens to an accepted wake after its ack is on the wire.

Per accepted message, in DISPATCH.md §1's order: refuse an untradeable price (real fires only),
snap the price to the market's tick grid and refuse a real fire whose *snapped* price left (0, 1)
([ours]), size the order, refuse while the kill switch is engaged, ask the risk gate, pass the
dispatcher's permission guard, count ``fired`` and dispatch; after a real dispatch feed its fill
to the risk gate and record the stage rows, whatever happened.

Two modes. Without an exchange (``orders`` is None) the path is SERVICE.md's: the configured
contract count, and a ``Dispatcher`` callable that places nothing by default; no order rows, no
stage rows. With an exchange (an :class:`OrderPath`) real fires are sized, gated, sent and audited
(``executor.exchange.dispatcher``), and refusals after the snap write ``rejected`` rows.

Shadow fires never delay a real one. A shadow fire is built in its own task (its ``order_build``
span) and then *offered* to the shadow lane (``executor.exchange.shadow_lane``): one task that
signs queued
shadow orders one at a time with a pass through the scheduler between them, by default in a
worker process (``executor.exchange.sign_worker``: a signature holds the GIL, and on the loop it
would stall
every connection); signed on the loop instead (``--shadow-signing loop``), a real fire task waits
behind at most one shadow signature, never a queue of them (measured by
``python -m bench.shadow_lane``; docs/RESULTS.md). A shadow fire has nothing to await before the
lane, so it runs in the connection task (``fire_now``), not a task of its own. Real fires never
enter the lane: they sign in their own task, and shadow fires take no rate-limit token and open no
connection. When the lane is full the shadow fire is skipped before signing, counted
``shadow_skipped`` (a subset of ``fired``), and only its ``order_build`` row is written.
tests/test_order_path.py shows the ordering: after a burst of shadow fires, a real order reaches
the exchange before the shadow orders queued ahead of it have all been signed.

Prices that cannot be snapped: the decoder refuses NaN and ``1e400``, but a finite price can still
defeat the snap (``1e308 / 0.01`` overflows to infinity and ``round`` raises ``OverflowError``; a
step product can round up past the largest double). Any fire, shadow or real, whose price cannot be
snapped to a finite number is refused as a price refusal (logged, counted in ``refused_price``). A
shadow fire with a finite price outside (0, 1) is still snapped and dispatched: shadow fires exist
to keep measuring.

Counters: ``accepted - unacked == fired + refused_*`` (every refusal); ``dispatch_errors`` and the
server's ``fires_cancelled`` are subsets of ``fired``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import structlog

from executor.clock import wall_ms
from executor.decide.killswitch import KillSwitch
from executor.decide.order_request import SIDE_FOR_DIRECTION, FireRequest, OrderTemplate, Side
from executor.decide.risk import RiskGate
from executor.decide.sizing import SizingConfig, contract_count
from executor.exchange.account import AccountState
from executor.exchange.dispatcher import OrderDispatcher, OrderSink
from executor.exchange.shadow_lane import ShadowJob, ShadowLane
from executor.exchange.stages import FireStamps, PerfToWall, stage_rows
from executor.logs import RateLimitedWarning
from executor.wire.protocol import Direction, WakeMessage

log = structlog.get_logger()

# Per-fire refusals are rate-limited per kind: a hostile or broken poller must not flood the log.
_price_refusal_warnings: Final = RateLimitedWarning("fire_refused_price")
_kill_switch_refusal_warnings: Final = RateLimitedWarning("fire_refused_kill_switch")
_permission_refusal_warnings: Final = RateLimitedWarning("fire_refused_permission")

FALLBACK_STEP: Final = 0.01
"""Tick used when no range of the market's grid covers the price: one cent."""


def snap_to_grid(price: float, ranges: Sequence[Sequence[float]]) -> float:
    """Snap ``price`` to the tick grid of the first range that covers it.

    A range ``[start, end, step]`` covers ``price`` when ``step > 0`` and
    ``start <= price <= end`` (both ends inclusive). With no covering range the one-cent grid is
    used. Rounding is Python's ``round``: half to even, as the reference does.
    """
    for start, end, step in ranges:
        if step > 0 and start <= price <= end:
            return round(price / step) * step
    return round(price / FALLBACK_STEP) * FALLBACK_STEP


DEFAULT_CONTRACT_COUNT: Final = 1
"""Contracts per order when the configuration says nothing: the smallest order the market takes."""

PRICE_DECIMALS: Final = 4
"""Decimals of the price string sent with an order (SERVICE.md: ``f"{wire_price:.4f}"``)."""


Dispatcher = Callable[[FireRequest], Awaitable[None]]
"""Places the order a request describes (no-exchange mode). Exceptions reach ``fire``'s caller."""


async def no_network_dispatcher(request: FireRequest) -> None:
    """The default dispatcher: returns at once and places nothing (the reference benchmark's fake).

    Cancellation: never checkpoints.
    """


class FireOutcome(enum.Enum):
    """How one fire ended."""

    FIRED = "fired"
    REFUSED_PRICE = "refused_price"
    REFUSED_KILL_SWITCH = "refused_kill_switch"
    REFUSED_VOLUME = "refused_volume"
    REFUSED_RISK = "refused_risk"
    REFUSED_PERMISSION = "refused_permission"
    DISPATCH_ERROR = "dispatch_error"
    SHADOW_SKIPPED = "shadow_skipped"


@dataclasses.dataclass(frozen=True, slots=True)
class FireCounters:
    """Outcomes of the fires a ``FirePath`` has handled (DISPATCH.md §1 defines each)."""

    fired: int
    refused_price: int
    refused_kill_switch: int
    refused_volume: int = 0
    refused_risk: int = 0
    refused_permission: int = 0
    dispatch_errors: int = 0
    shadow_skipped: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class OrderPath:
    """What a fire path needs to place real orders (assembled by ``executor.fire.assembly``).

    Attributes:
        dispatcher: builds, sends and audits orders.
        sink: telemetry, for stage rows.
        lane: where shadow fires are signed.
        sizing: the contract-count rule's configuration.
        risk: the risk gate, or None when it is disabled.
        account: the last polled balance (sizing reads ``balance_dollars``).
        clock: the perf-to-wall offset the stage rows are anchored with.
        clock_domain: this process's clock domain (``executor.clock.clock_domain()``).
    """

    dispatcher: OrderDispatcher
    sink: OrderSink
    lane: ShadowLane
    sizing: SizingConfig
    risk: RiskGate | None
    account: AccountState
    clock: PerfToWall
    clock_domain: str


class FirePath:
    """The fire path of one executor: refusals, snap, sizing, gates, template cache and dispatch.

    Not safe to share between threads; any number of Trio tasks may call ``fire`` concurrently
    (nothing in it awaits before the dispatch, except queuing a rejected row after a refusal).

    Args:
        dispatcher: places orders when there is no exchange; the default places nothing.
        kill_switch: consulted for real fires; None means there is no switch.
        contract_count: contracts per order without an exchange, at least 1.
        orders: the exchange order path; None keeps SERVICE.md's no-exchange behaviour.
    """

    def __init__(
        self,
        *,
        dispatcher: Dispatcher = no_network_dispatcher,
        kill_switch: KillSwitch | None = None,
        contract_count: int = DEFAULT_CONTRACT_COUNT,
        orders: OrderPath | None = None,
    ) -> None:
        if isinstance(contract_count, bool) or contract_count < 1:
            raise ValueError(f"contract_count must be a positive integer, got {contract_count!r}")
        self._dispatcher = dispatcher
        self._kill_switch = kill_switch
        self._contract_count = contract_count
        self.orders = orders
        self._templates: dict[tuple[str, Direction], OrderTemplate] = {}
        self._counts = {field.name: 0 for field in dataclasses.fields(FireCounters)}

    @property
    def templates_built(self) -> int:
        """How many order templates have been built (one per distinct market and direction)."""
        return len(self._templates)

    def counters(self) -> FireCounters:
        """A snapshot of the outcome counters."""
        return FireCounters(**self._counts)

    def fire_now(self, message: WakeMessage) -> FireOutcome | None:
        """Finish the fire here and now when it has nothing to await; None when it needs a task.

        Nothing to await: a price refusal; a shadow fire with an exchange (sized, built and
        offered to the shadow lane, or skipped); and, without an exchange, any fire the default
        no-network dispatcher handles. A real order, a ``rejected`` row to queue, or a custom
        dispatcher needs a task of its own: then nothing has been counted and the caller runs
        :meth:`fire` in a task. Starting a task costs more than the fire it would run in these
        cases (docs/RESULTS.md, 2026-11-30), and a burst of shadow wakes is exactly these cases.

        Cancellation: never checkpoints.
        """
        wire_price = self._checked_price(message)
        if isinstance(wire_price, FireOutcome):
            return wire_price
        orders = self.orders
        if orders is not None:
            return self._fire_shadow_order(message, wire_price, orders) if message.dry_run else None
        if self._dispatcher is not no_network_dispatcher:
            return None
        if not message.dry_run and self._kill_switch_reason(message) is not None:
            return FireOutcome.REFUSED_KILL_SWITCH
        self._request(message, wire_price, self._contract_count)
        self._counts["fired"] += 1
        return FireOutcome.FIRED  # the no-network dispatcher would return at once, placing nothing

    async def fire(self, message: WakeMessage) -> FireOutcome:
        """Run one accepted wake through the fire path (DISPATCH.md §1).

        ``fired`` is counted before the dispatch is awaited, so a dispatch that raises or is
        cancelled has still been counted as fired.

        Raises:
            Exception: without an exchange, whatever the dispatcher raises, unchanged (the caller
                contains it). With one, a failed dispatch is logged and counted here instead.

        Cancellation: refusals return without a checkpoint, except for queuing a ``rejected``
        row, which is shielded and bounded; a cancelled real dispatch still writes its
        resolution and stage rows, then ``Cancelled`` propagates.
        """
        outcome = self.fire_now(message)
        if outcome is not None:
            return outcome
        # fire_now found nothing to refuse on price and counted nothing: the fire needs to await.
        wire_price = self._checked_price(message)
        assert not isinstance(wire_price, FireOutcome)
        if self.orders is not None:
            return await self._fire_real_order(message, wire_price, self.orders)
        if not message.dry_run and self._kill_switch_reason(message) is not None:
            return FireOutcome.REFUSED_KILL_SWITCH
        request = self._request(message, wire_price, self._contract_count)
        self._counts["fired"] += 1
        await self._dispatcher(request)
        return FireOutcome.FIRED

    def _checked_price(self, message: WakeMessage) -> float | FireOutcome:
        """The snapped price, or the price refusal (counted and logged) that ends the fire."""
        dry_run = message.dry_run
        price = message.wire_price_yes_dollars
        if not dry_run and not 0.0 < price < 1.0:  # NaN fails the comparison too
            return self._refuse_price(message, "price not strictly between 0 and 1")
        wire_price = _snap_or_nan(price, message.price_ranges)
        if not math.isfinite(wire_price):
            return self._refuse_price(message, "price cannot be snapped to a finite tick")
        if not dry_run and not 0.0 < wire_price < 1.0:
            return self._refuse_price(message, "snapped price not strictly between 0 and 1")
        return wire_price

    def _size(self, message: WakeMessage, orders: OrderPath) -> int:
        return contract_count(
            orders.sizing,
            dry_run=message.dry_run,
            edge=message.edge,
            kalshi_price=message.kalshi_price,
            available_size_contracts=message.available_size_contracts,
            balance_dollars=orders.account.balance_dollars,
        )

    def _permission_refused(self, message: WakeMessage, orders: OrderPath) -> bool:
        refusal = orders.dispatcher.permission_refusal()
        if refusal is None:
            return False
        self._counts["refused_permission"] += 1
        _permission_refusal_warnings.warning(reason=refusal, dry_run=message.dry_run)
        return True

    def _fire_shadow_order(
        self, message: WakeMessage, wire_price: float, orders: OrderPath
    ) -> FireOutcome:
        request = self._request(message, wire_price, self._size(message, orders))
        if self._permission_refused(message, orders):
            return FireOutcome.REFUSED_PERMISSION
        self._counts["fired"] += 1
        return self._fire_shadow(message, request, orders)

    async def _fire_real_order(
        self, message: WakeMessage, wire_price: float, orders: OrderPath
    ) -> FireOutcome:
        count = self._size(message, orders)
        if count < 1:
            available = message.available_size_contracts
            reason = f"insufficient resting volume: {available:g} contracts at the level"
            rejected = self._request(message, wire_price, orders.sizing.fixed_contract_count)
            return await self._reject(message, rejected, FireOutcome.REFUSED_VOLUME, reason)
        request = self._request(message, wire_price, count)
        switch_reason = self._kill_switch_reason(message)
        if switch_reason is not None:
            reason = f"kill switch engaged: {switch_reason}"
            return await self._reject(message, request, FireOutcome.REFUSED_KILL_SWITCH, reason)
        risk = orders.risk
        if risk is not None:
            risk_reason = risk.check(
                message.market_ticker,
                message.direction,
                message.exchange_index,
                count,
                wire_price,
                wall_ms(),
                message.correlation_group,
            )
            if risk_reason is not None:
                reason = f"risk gate: {risk_reason}"
                return await self._reject(message, request, FireOutcome.REFUSED_RISK, reason)
        if self._permission_refused(message, orders):
            return FireOutcome.REFUSED_PERMISSION
        self._counts["fired"] += 1
        return await self._fire_real(message, request, orders, wire_price)

    def _fire_shadow(
        self, message: WakeMessage, request: FireRequest, orders: OrderPath
    ) -> FireOutcome:
        stamps = FireStamps()
        body = orders.dispatcher.build_shadow(request, stamps)

        def finish() -> None:
            for row in stage_rows(message, stamps, orders.clock, orders.clock_domain):
                orders.sink.record(row)

        if orders.lane.offer(ShadowJob(body, stamps, finish)):
            return FireOutcome.FIRED
        self._counts["shadow_skipped"] += 1
        finish()  # only order_build was reached
        return FireOutcome.SHADOW_SKIPPED

    async def _fire_real(
        self, message: WakeMessage, request: FireRequest, orders: OrderPath, wire_price: float
    ) -> FireOutcome:
        risk = orders.risk
        ticker, group = message.market_ticker, message.correlation_group
        if risk is not None:
            risk.record_attempt(
                ticker, message.direction, request.count, wire_price, wall_ms(), group
            )
            risk.dispatch_started()
        stamps = FireStamps()
        outcome = FireOutcome.FIRED
        try:
            result = await orders.dispatcher.dispatch(request, stamps)
        except Exception as error:
            outcome = FireOutcome.DISPATCH_ERROR
            self._counts["dispatch_errors"] += 1
            log.error(
                "dispatch failed",
                error=str(error),
                error_type=type(error).__name__,
                correlation_id=message.correlation_id,
                market_ticker=ticker,
            )
        else:
            if risk is not None and result.fill_count is not None and result.fill_count > 0:
                risk.record_fill(ticker, result.fill_count, wall_ms(), group)
        finally:
            if risk is not None:
                risk.dispatch_finished()
            for row in stage_rows(message, stamps, orders.clock, orders.clock_domain):
                orders.sink.record(row)
        return outcome

    async def _reject(
        self, message: WakeMessage, request: FireRequest, outcome: FireOutcome, reason: str
    ) -> FireOutcome:
        self._counts[outcome.value] += 1
        _refusal_warnings(outcome).warning(
            reason=reason,
            correlation_id=message.correlation_id,
            market_ticker=message.market_ticker,
        )
        assert self.orders is not None
        await self.orders.dispatcher.record_rejected(request, reason)
        return outcome

    def _kill_switch_reason(self, message: WakeMessage) -> str | None:
        """The engaged switch's reason (counted and logged as a refusal), or None."""
        if self._kill_switch is None:
            return None
        reason = self._kill_switch.engaged_reason()
        if reason is not None and self.orders is None:
            self._counts["refused_kill_switch"] += 1
            _kill_switch_refusal_warnings.warning(
                reason=reason,
                correlation_id=message.correlation_id,
                market_ticker=message.market_ticker,
            )
        return reason

    def _request(self, message: WakeMessage, wire_price: float, count: int) -> FireRequest:
        key = (message.market_ticker, message.direction)
        template = self._templates.get(key)
        if template is None:
            template = OrderTemplate(key[0], key[1], SIDE_FOR_DIRECTION[key[1]])
            self._templates[key] = template
        return FireRequest(
            template=template,
            price=f"{wire_price:.{PRICE_DECIMALS}f}",
            count=count,
            exchange_index=message.exchange_index,
            correlation_id=message.correlation_id,
            correlation_group=message.correlation_group,
            dry_run=message.dry_run,
        )

    def _refuse_price(self, message: WakeMessage, why: str) -> FireOutcome:
        self._counts["refused_price"] += 1
        _price_refusal_warnings.warning(
            why=why,
            wire_price_yes_dollars=message.wire_price_yes_dollars,
            dry_run=message.dry_run,
            correlation_id=message.correlation_id,
            market_ticker=message.market_ticker,
        )
        return FireOutcome.REFUSED_PRICE


__all__ = [
    "DEFAULT_CONTRACT_COUNT",
    "Dispatcher",
    "FireCounters",
    "FireOutcome",
    "FirePath",
    "FireRequest",
    "OrderPath",
    "OrderTemplate",
    "Side",
    "no_network_dispatcher",
    "snap_to_grid",
]

def _snap_or_nan(price: float, ranges: Sequence[Sequence[float]]) -> float:
    """``snap_to_grid``, or NaN where it cannot produce a number (NaN, infinity, overflow)."""
    try:
        return snap_to_grid(price, ranges)
    except (OverflowError, ValueError):  # round(inf) and round(nan)
        return math.nan


_refusal_limiters: dict[FireOutcome, RateLimitedWarning] = {}


def _refusal_warnings(outcome: FireOutcome) -> RateLimitedWarning:
    """The rate-limited warning of one refusal kind (``fire_refused_volume`` and so on)."""
    limiter = _refusal_limiters.get(outcome)
    if limiter is None:
        if outcome is FireOutcome.REFUSED_KILL_SWITCH:
            limiter = _kill_switch_refusal_warnings
        else:
            limiter = RateLimitedWarning(f"fire_{outcome.value}")
        _refusal_limiters[outcome] = limiter
    return limiter
