"""The fire path: what happens to an accepted wake after its ack is on the wire.

Deciding, then executing. Per accepted message the fire path asks the decision layer once
(``executor.decide.decision.Decider.decide``: the price checks and the snap, sizing, the kill
switch, the risk gate and the production guard, in DISPATCH.md §1's order) and gets one value
back: a refusal, which it counts and logs (and, when the refusal carries a request, hands to the
dispatcher for its ``rejected`` row), or an order, which it counts as ``fired`` and hands down to
the exchange layer: a real order in two calls, ``OrderDispatcher.begin`` where the wake was acked
(in the connection's task: the decision, the risk gate's books, the ``pending`` row and, when
nothing would wait, the request written) and ``OrderDispatcher.complete`` in a task of the fire's
own (:meth:`FirePath.start` returns that rest), a shadow order built by the dispatcher and offered
to the shadow lane. Nothing is handed back up to the decision. It records the stage rows, whatever
happened.

Two modes. Without an exchange (``orders`` is None) the path is SERVICE.md's: the configured
contract count, and a ``Dispatcher`` callable that places nothing by default; no order rows, no
stage rows. With an exchange (an :class:`OrderPath`) real fires are sized, gated, sent and audited
(``executor.exchange.orders.dispatcher``), and refusals after the snap write ``rejected`` rows.

Shadow fires never delay a real one. A shadow fire has nothing to await before the lane, so it runs
in the connection task (``fire_now``), not a task of its own: the dispatcher builds its body (its
``order_build`` span) and the fire path *offers* it to the shadow lane
(``executor.exchange.orders.shadow_lane``): one task that signs queued shadow orders one at a time
with a pass through the scheduler between them, by default in a worker process
(``executor.exchange.orders.sign_worker``: a signature holds the GIL, and on the loop it would stall
every connection); signed on the loop instead (``--shadow-signing loop``), a real fire task waits
behind at most one shadow signature, never a queue of them (measured by ``python -m
bench.experiments.shadow_lane``; docs/performance/notebook/). With signatures made ahead
(``executor.exchange.orders.presign``), a shadow fire that finds a spare one is finished inside the
offer, with no signing left to defer. Real fires never enter the lane: they take a presigned
signature or sign in their own task, and shadow fires take no rate-limit token and open no
connection. When the lane is full the shadow fire is skipped before signing, counted
``shadow_skipped`` (a subset of ``fired``), and only its ``order_build`` row is written.
tests/exchange/test_order_path.py shows the ordering: after a burst of shadow fires, a real order
reaches the exchange before the shadow orders queued ahead of it have all been signed.

Prices that cannot be snapped (``executor.decide.prices``) are price refusals (logged, counted in
``refused_price``), shadow or real; a shadow fire with a finite price outside (0, 1) is still
snapped and dispatched: shadow fires exist to keep measuring.

Counters: ``accepted - unacked == fired + refused_*`` (every refusal); ``dispatch_errors`` and the
server's ``fires_cancelled`` are subsets of ``fired``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import structlog

from executor.clock import stamp_ns
from executor.config.sizing import SizingConfig
from executor.decide.decision import (
    AuditTrail,
    Balance,
    Decider,
    KillSwitchState,
    Order,
    OrderRules,
    Refusal,
    RefusalKind,
)
from executor.decide.order_request import FireRequest, OrderTemplate, Side
from executor.decide.risk import RiskGate
from executor.exchange.halts import ExchangeHalts
from executor.exchange.orders.dispatcher import OrderDispatcher, StartedOrder
from executor.exchange.orders.shadow_lane import ShadowJob, ShadowLane
from executor.exchange.orders.stages import FireStamps, PerfToWall, log_resolution, stage_rows
from executor.exchange.protocols import OrderSink
from executor.fire.outcomes import FireCounters, FireOutcome, OrderGroupGate, warn_refusal
from executor.recording.counting.counter_list import SERVER_COUNTERS, Owner
from executor.recording.rows import row_fields
from executor.wire.protocol import WakeMessage

log = structlog.get_logger()

DEFAULT_CONTRACT_COUNT: Final = 1
"""Contracts per order when the configuration says nothing: the smallest order the market takes."""

Arrival = tuple[int, int]
"""``(read_ns, acked_ns)``: when the connection loop had read the wake and handed its ack over."""

Dispatcher = Callable[[FireRequest], Awaitable[None]]
"""Places the order a request describes (no-exchange mode). Exceptions reach ``fire``'s caller."""


async def no_network_dispatcher(request: FireRequest) -> None:
    """The default dispatcher: returns at once and places nothing (the reference benchmark's fake).

    Cancellation: never checkpoints.
    """


FireRest = Callable[[], Awaitable[FireOutcome]]
"""What :meth:`FirePath.start` leaves of a fire: awaited in the fire's own task."""


@dataclasses.dataclass(frozen=True, slots=True)
class OrderPath:
    """What a fire path needs to place real orders (assembled by ``executor.trading.assembly``).

    Attributes:
        dispatcher: builds, sends and audits orders.
        sink: telemetry, for stage rows.
        lane: where shadow fires are signed.
        sizing: the contract-count rule's configuration.
        risk: the risk gate, or None when it is disabled.
        account: the last polled balance (sizing reads ``balance_dollars``).
        clock: the perf-to-wall offset the stage rows are anchored with.
        clock_domain: this process's clock domain (``executor.clock.clock_domain()``).
        audit: whether order rows can be written (telemetry); None never refuses.
        book: the order group's state (the book guard); None has no group.
        counters: the order path's counters (reconciliation, the transport, the stream, the
            book, the rate limits, adoption), gathered by the composition root; reported with
            the fire path's own. None reports none.
        halts: the exchange's own halts (its trigger of the group, pauses): the decision reads
            them, and an order's refusal is told to them; None hears none.
    """

    dispatcher: OrderDispatcher
    sink: OrderSink
    lane: ShadowLane
    sizing: SizingConfig
    risk: RiskGate | None
    account: Balance
    clock: PerfToWall
    clock_domain: str
    audit: AuditTrail | None = None
    book: OrderGroupGate | None = None
    counters: Callable[[], Mapping[str, int]] | None = None
    halts: ExchangeHalts | None = None

    def rules(self) -> OrderRules:
        """What the decision consults with this exchange: sizing, balance, risk gate, guard,
        audit trail, the exchange's halts."""
        permission = self.dispatcher.policy.permission
        return OrderRules(self.sizing, self.account, self.risk, permission, self.audit, self.halts)


class FirePath:
    """The fire path of one executor: one decision, then its execution, counted.

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
        kill_switch: KillSwitchState | None = None,
        contract_count: int = DEFAULT_CONTRACT_COUNT,
        orders: OrderPath | None = None,
    ) -> None:
        if isinstance(contract_count, bool) or contract_count < 1:
            raise ValueError(f"contract_count must be a positive integer, got {contract_count!r}")
        self._dispatcher = dispatcher
        self.orders = orders
        self._decider = Decider(
            kill_switch=kill_switch,
            contract_count=contract_count,
            rules=None if orders is None else orders.rules(),
        )
        self._counts = {spec.name: 0 for spec in SERVER_COUNTERS if spec.owner is Owner.FIRE}

    @property
    def templates_built(self) -> int:
        """How many order templates have been built (one per distinct market and direction)."""
        return self._decider.templates_built

    def counters(self) -> FireCounters:
        """A snapshot of the outcome counters, with the order path's (``OrderPath.counters``)."""
        gathered = self.orders.counters if self.orders is not None else None
        return FireCounters(**self._counts, **(gathered() if gathered is not None else {}))

    def fire_now(self, message: WakeMessage) -> FireOutcome | None:
        """Finish the fire here and now when it has nothing to await; None when it needs a task.

        Nothing to await: a price refusal; a shadow fire with an exchange (sized, built and
        offered to the shadow lane, or skipped); and, without an exchange, any fire the default
        no-network dispatcher handles. A real order, a ``rejected`` row to queue, or a custom
        dispatcher needs a task of its own: then only the price has been checked (the decision is
        made in that task, by :meth:`fire`), nothing has been counted, and the caller runs
        :meth:`fire` in a task. Starting a task costs more than the fire it would run in these
        cases (docs/performance/notebook/, 2026-11-30), and a burst of shadow wakes is exactly these
        cases.

        Cancellation: never checkpoints.
        """
        orders = self.orders
        if self._needs_task(message):
            price_refusal = self._decider.price_refusal(message)
            return None if price_refusal is None else self._refused(message, price_refusal)
        decision = self._decider.decide(message)
        if isinstance(decision, Refusal):
            assert decision.request is None  # a rejected row needs a task; none arises here
            return self._refused(message, decision)
        self._counts["fired"] += 1
        if orders is None:
            return FireOutcome.FIRED  # the no-network dispatcher would return at once
        return self._fire_shadow(message, decision, orders)

    def rehearse(self, message: WakeMessage) -> None:
        """Decide ``message`` again and build its order's record and body, throwing all away
        (``executor.fire.keep_warm``): no counter, row, id, file or byte is touched."""
        decision = self._decider.decide(message)
        if self.orders is not None and isinstance(decision, Order):
            self.orders.dispatcher.rehearse(decision.request)

    def start(self, message: WakeMessage, arrival: Arrival | None = None) -> FireOutcome | FireRest:
        """Do everything of this fire that needs no waiting, now; the rest, if any, to await.

        A fire :meth:`fire_now` finishes ends here (its outcome). A real order is decided here
        and, when the transport can without waiting, written here: the risk gate's books, the
        ``pending`` row and the request all happen before this returns, and what is left (the
        response, its rows) is the returned coroutine function, for the caller to run in a task
        of its own. A refusal with a ``rejected`` row to queue, or a custom dispatcher, is left
        whole to that coroutine function.

        Args:
            message: the acked wake.
            arrival: ``(read_ns, acked_ns)`` from the connection loop, for the path's stamps.

        Cancellation: never checkpoints.
        """
        if not self._needs_task(message):
            outcome = self.fire_now(message)
            assert outcome is not None  # fire_now finishes every fire that needs no task
            return outcome
        orders = self.orders
        if orders is None:
            price_refusal = self._decider.price_refusal(message)
            if price_refusal is not None:
                return self._refused(message, price_refusal)
            return functools.partial(self._fire_custom, message)
        return self._start_real(message, arrival, orders)

    def _start_real(
        self, message: WakeMessage, arrival: Arrival | None, orders: OrderPath, held: bool = False
    ) -> FireOutcome | FireRest:
        """:meth:`start` with an exchange. A real fire let through while the order group still
        stands triggered (a halt just ended, the reset not yet answered) is held and decided
        again once the group is reset (``BookGuard.wait_group_open``): the exchange would
        reject it before."""
        stamps = FireStamps()
        stamps.fire_ns = stamp_ns()
        if arrival is not None:
            stamps.read_ns, stamps.acked_ns = arrival
        decision = self._decider.decide(message)
        stamps.decided_ns = stamp_ns()
        if isinstance(decision, Refusal):
            outcome = self._refused(message, decision)
            if decision.request is None:
                return outcome
            if decision.kind is RefusalKind.AUDIT:
                # The row cannot be written: the log holds it instead, every one of them.
                row = orders.dispatcher.rejected_row(decision.request, decision.reason)
                log.error("real fire refused: audit trail unavailable", row=row_fields(row))
                return outcome
            return functools.partial(self._record_rejected, decision, outcome, orders)
        book = orders.book
        if not held and book is not None and book.group_triggered:
            return functools.partial(self._fire_after_reset, message, arrival, orders, book)
        self._counts["fired"] += 1
        started = orders.dispatcher.begin(decision, stamps)
        return functools.partial(self._fire_real, message, started, orders)

    async def _fire_after_reset(
        self,
        message: WakeMessage,
        arrival: Arrival | None,
        orders: OrderPath,
        book: OrderGroupGate,
    ) -> FireOutcome:
        """A real fire held for the group's reset: decided again after the wait (the switch or
        the trail may have changed meanwhile), then sent even if the group is still triggered
        (the exchange's rejection is then the row's truth)."""
        await book.wait_group_open()
        started = self._start_real(message, arrival, orders, held=True)
        if isinstance(started, FireOutcome):
            return started
        return await started()

    async def fire(self, message: WakeMessage, arrival: Arrival | None = None) -> FireOutcome:
        """Run one accepted wake through the fire path (DISPATCH.md §1): :meth:`start`, then
        the rest it leaves, awaited here.

        ``fired`` is counted before the dispatch is awaited, so a dispatch that raises or is
        cancelled has still been counted as fired.

        Raises:
            Exception: without an exchange, whatever the dispatcher raises, unchanged (the caller
                contains it). With one, a failed dispatch is logged and counted here instead.

        Cancellation: refusals return without a checkpoint, except for queuing a ``rejected``
        row, which is shielded and bounded; a cancelled real dispatch still writes its
        resolution and stage rows, then ``Cancelled`` propagates.
        """
        started = self.start(message, arrival)
        if isinstance(started, FireOutcome):
            return started
        return await started()

    async def _fire_custom(self, message: WakeMessage) -> FireOutcome:
        """A fire without an exchange whose dispatcher is not the default one."""
        decision = self._decider.decide(message)
        if isinstance(decision, Refusal):
            return self._refused(message, decision)
        self._counts["fired"] += 1
        await self._dispatcher(decision.request)
        return FireOutcome.FIRED

    async def _record_rejected(
        self, refusal: Refusal, outcome: FireOutcome, orders: OrderPath
    ) -> FireOutcome:
        assert refusal.request is not None
        await orders.dispatcher.record_rejected(refusal.request, refusal.reason)
        return outcome

    def _needs_task(self, message: WakeMessage) -> bool:
        """Whether the fire may await: a real order with an exchange, or a custom dispatcher."""
        if self.orders is None:
            return self._dispatcher is not no_network_dispatcher
        return not message.dry_run

    def _fire_shadow(self, message: WakeMessage, order: Order, orders: OrderPath) -> FireOutcome:
        stamps = FireStamps()
        body = orders.dispatcher.build_shadow(order.request, stamps)

        def finish() -> None:
            for row in stage_rows(message, stamps, orders.clock, orders.clock_domain):
                orders.sink.record(row)

        if orders.lane.offer(ShadowJob(body, stamps, finish)):
            return FireOutcome.FIRED
        self._counts["shadow_skipped"] += 1
        finish()  # only order_build was reached
        return FireOutcome.SHADOW_SKIPPED

    async def _fire_real(
        self, message: WakeMessage, started: StartedOrder, orders: OrderPath
    ) -> FireOutcome:
        stamps = started.stamps
        try:
            await orders.dispatcher.complete(started)
        except Exception as error:
            self._counts["dispatch_errors"] += 1
            if orders.halts is not None:  # a halt the exchange answers with stops the next fire
                orders.halts.hear_order_refusal(str(error))
            log.error(
                "dispatch failed",
                error=str(error),
                error_type=type(error).__name__,
                correlation_id=message.correlation_id,
                market_ticker=message.market_ticker,
            )
            return FireOutcome.DISPATCH_ERROR
        finally:
            rows = stage_rows(message, stamps, orders.clock, orders.clock_domain)
            for row in rows:
                orders.sink.record(row)
            log_resolution(stamps.resolution, rows)  # after the dispatch: off the timed span
        return FireOutcome.FIRED

    def _refused(self, message: WakeMessage, refusal: Refusal) -> FireOutcome:
        """Count and log (rate-limited) one refusal; its ``rejected`` row is the caller's."""
        self._counts[refusal.kind.value] += 1
        warn_refusal(message, refusal)
        return FireOutcome(refusal.kind.value)


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
]
