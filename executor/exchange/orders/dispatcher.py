"""The dispatcher: executes a decided order, from its ``client_order_id`` to its audit row (§4).

The decision (``executor.decide.decision``) has already passed the production guard, the kill
switch and the risk gate. :meth:`OrderDispatcher.execute` places a real order and keeps the risk
gate's books through the order's :class:`~executor.decide.decision.RiskTicket` (attempt and
in-flight count before the send, the in-flight count back down whatever happened);
:meth:`OrderDispatcher.record_rejected` writes a refusal's ``rejected`` row. With a reconciler the
order is known to the order ledger from its ``pending`` row on, its answer is one observation
among the others (``executor.exchange.follow.ledger``), and the ledger, not the ticket, tells the
risk gate of its fill, once whoever saw it first.

A real fire: mint a ``client_order_id``, queue the ``pending`` row without waiting, build the body
from the template, hand it to the transport, read the status from the response, and queue the
``resolution`` row whatever happened (success, error, cancellation). A shadow fire is built here
the same way and then signed by the shadow lane (``executor.exchange.orders.shadow_lane``); it
writes no order row.

The intent record (:meth:`OrderDispatcher._record_intent`, one ``os.write`` of the pending row) is
the one file call before the send, in ``begin`` before the body is built; refused, nothing is sent.

The pending row is queued *after* the request was written (or handed to the fire's task), not
before the send as DISPATCH.md §4 orders it: the intent record already holds the row where a
SIGKILL cannot take it, so queuing it first bought nothing, and its queueing (a channel send that
wakes the telemetry consumer) was on the order's way to the wire (measured in
docs/performance/notebook/, 2026-12-02). DISPATCH.md §1 step 6 allows nothing that touches telemetry
between building the order and handing the request to the transport: ``_build_and_start`` is that
stretch, and a test reads its syntax tree to keep it free of telemetry, logging and files.

A real order is placed in two halves: :meth:`OrderDispatcher.begin`, which never waits (the risk
gate's attempt, the ids, the ``pending`` row, the body and, when the transport can without
waiting, the request written: ``ExchangeClient.send_order_now``), runs where the fire is decided,
in the connection's task; :meth:`OrderDispatcher.complete` (the response, the resolution row, the
fill, reconciliation) runs in the fire's own task. ``execute`` is the two in one.

Every stamp goes into a :class:`~executor.exchange.orders.stages.FireStamps` the caller owns, so a
dispatch that raises or is cancelled still leaves the stamps it reached for the stage rows.

An order whose outcome is unknown (the transport's ``maybe_placed``: a timeout after sending, a
connection lost after sending, a 5xx, a 409 "already exists"; or a 2xx answer without an order
object, which says nothing of the order) resolves as ``error`` with ``error_message`` beginning
``"outcome unknown: "``, and then, with a reconciler, is looked up on the exchange
(``executor.exchange.follow.reconcile``): found, the dispatch returns the exchange's status and fill
as if the answer had come; absent or still unknown, the original error goes on (an unknown one is
followed by the account poll). It is never re-sent. An order answered but not final (resting on the
book, or answered without a fill count) is handed to the reconciler to be followed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

import structlog
import trio

from executor.clock import stamp_ns, wall_ms
from executor.decide.decision import Order
from executor.decide.order_request import FireRequest
from executor.exchange.follow.observation import observed_row
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.messages import (
    ExchangeAmbiguous,
    ExchangeError,
    IntentNotRecorded,
    OrderSpec,
    OrderStamps,
    has_order,
    order_body,
    order_payload,
    order_status,
    parse_fill_count,
)
from executor.exchange.orders.connection import OrderInFlight
from executor.exchange.orders.dispatch_terms import (
    DispatchResult,
    OrderPlacer,
    OrderStarter,
    StartedOrder,
)
from executor.exchange.orders.rows import (
    FILL_COLUMNS,
    OrderPolicy,
    PreparedOrder,
    order_correlation_id,
    order_row,
    pending_record,
    rejected_row,
)
from executor.exchange.orders.stages import FireStamps, engine_ts_ms
from executor.exchange.protocols import RESOLUTION_TIMEOUT_S, OrderSink
from executor.recording.orders.installation import ClientOrderIds, new_prefix
from executor.recording.orders.intent_journal import JournalWriteError, RecordFields
from executor.recording.orders.terms import CANCELLED_AT_SHUTDOWN, OUTCOME_UNKNOWN_PREFIX
from executor.recording.rows import (
    OrderRow,
    OrderRowKind,
    OrderStatus,
)

log = structlog.get_logger()


class OrderDispatcher:
    """Builds, sends and audits orders through one exchange client.

    Args:
        client: the transport.
        sink: where order rows go.
        policy: order flags (its production guard is applied by the decision, not here).
        reconciler: looks up orders whose outcome is unknown and follows resting ones; None
            leaves an unknown outcome as its ``error`` row (for a later start-up to resolve).
        ids: mints ``client_order_id`` with the installation's prefix (None: a random one).
    """

    def __init__(
        self,
        client: OrderPlacer,
        sink: OrderSink,
        policy: OrderPolicy,
        reconciler: Reconciler | None = None,
        ids: ClientOrderIds | None = None,
    ) -> None:
        self.client = client
        self._send_now = client.send_order_now if isinstance(client, OrderStarter) else None
        self.sink = sink
        self.policy = policy
        self.reconciler = reconciler
        self.ids = ids or ClientOrderIds(new_prefix())

    def prepare(self, request: FireRequest, *, real: bool = False) -> PreparedOrder:
        """Mint the order's ``client_order_id`` (a real order's drawn ahead) and its row's
        correlation id."""
        client_order_id = self.ids.take() if real else self.ids.mint()
        return PreparedOrder(request, client_order_id, order_correlation_id(request.correlation_id))

    def rehearse(self, request: FireRequest) -> None:
        """Build what :meth:`begin` builds before the first byte (the intent record's fields,
        the body) under a placeholder id, and throw it away: no id drawn, nothing recorded or
        sent (``executor.fire.keep_warm``)."""
        correlation_id = order_correlation_id(request.correlation_id)
        prepared = PreparedOrder(request, REHEARSAL_ORDER_ID, correlation_id)
        pending_record(prepared, self.policy, wall_ms())
        order_body(self._spec(prepared))

    def build_shadow(self, request: FireRequest, stamps: FireStamps) -> bytes:
        """A shadow fire's body, built exactly like a real one's (stamped for ``order_build``)."""
        prepared = self.prepare(request)
        stamps.build_start_ns = stamp_ns()
        body = order_body(self._spec(prepared))
        stamps.build_end_ns = stamp_ns()
        return body

    async def execute(self, order: Order, stamps: FireStamps) -> DispatchResult:
        """Place a decided real order, keeping the risk gate's books (DISPATCH.md §1 steps 5-7).

        :meth:`begin` then :meth:`complete`, in one call.

        Raises:
            Exception: whatever :meth:`dispatch` raised.

        Cancellation: as :meth:`dispatch`; the in-flight count still comes back down.
        """
        return await self.complete(self.begin(order, stamps))

    def begin(self, order: Order, stamps: FireStamps) -> StartedOrder:
        """Everything of a real order that needs no waiting, now: the risk gate's attempt and
        in-flight count, the ids, the ``pending`` row, the body, and (when the transport can
        without waiting) the request written. :meth:`complete` must follow, in the fire's task.

        Cancellation: never checkpoints. A failure here is raised by :meth:`complete`.
        """
        prepared = self.prepare(order.request, real=True)
        started = StartedOrder(order, prepared, wall_ms(), stamps)
        recorded = False
        try:
            self._record_intent(pending_record(prepared, self.policy, started.requested_at_ms))
            recorded = True
            started.body, started.in_flight = self._build_and_start(prepared, stamps)
        except Exception as error:
            started.failure = error
        finally:
            # After the first byte, with no checkpoint since the decision: the risk gate's
            # attempt (nothing else can be decided in between), the row the record holds, the
            # next ids.
            if order.ticket is not None:
                order.ticket.sending()
            if recorded:
                pending = order_row(
                    prepared, self.policy, OrderRowKind.PENDING, started.requested_at_ms
                )
                self.sink.record_pending(pending)
                if self.reconciler is not None:  # the ledger hears of every fill from now on
                    self.reconciler.keeper.track(pending, counted=False)
            self.ids.draw_ahead()
        return started

    async def complete(self, started: StartedOrder) -> DispatchResult:
        """The rest of a :meth:`begin`: the response, the resolution row, the fill to the gate;
        the in-flight count comes back down whatever happened.

        Raises:
            Exception: whatever :meth:`dispatch` raised.

        Cancellation: as :meth:`dispatch`.
        """
        ticket = started.order.ticket
        try:
            result = await self._dispatch_started(started)
            if ticket is not None and self.reconciler is None:
                ticket.filled(result.fill_count)  # else the ledger told the gate, once
        finally:
            if ticket is not None:
                ticket.finished()
        return result

    async def dispatch(self, request: FireRequest, stamps: FireStamps) -> DispatchResult:
        """Send one real order and queue its pending and resolution rows.

        An unknown outcome is reconciled (module docstring): found on the exchange, the result is
        the exchange's status and fill; the row was corrected by the reconciler.

        Raises:
            Exception: whatever the transport raised (``ExchangeError`` and kin), after the
                resolution row was queued with status ``error`` (and, for an unknown outcome,
                after the exchange was asked and did not have the order or could not say).

        Cancellation: the resolution row (``error``, ``"cancelled at shutdown"``) is still queued,
        shielded, for at most ``RESOLUTION_TIMEOUT_S``; then ``Cancelled`` propagates. Cut while
        reconciling, the row stays ``error`` (outcome unknown) for the next start-up.
        """
        return await self._dispatch_started(self.begin(Order(request), stamps))

    async def _dispatch_started(self, started: StartedOrder) -> DispatchResult:
        stamps = started.stamps
        try:
            result = await self._send_and_resolve(started)
        except ExchangeError as error:
            if self.reconciler is None or not _outcome_unknown(error, stamps.order):
                raise
            written = stamps.resolution  # the "outcome unknown" error row, as queued
            assert written is not None  # _send_and_resolve sets it whatever happened
            resolution = await self.reconciler.resolve(written, _error_text(error))
            stamps.resolution = resolution.row  # the order's log line tells what was learned
            if resolution.order is None:
                raise
            return DispatchResult(resolution.order.status, resolution.order.filled)
        return result

    async def _send_and_resolve(self, started: StartedOrder) -> DispatchResult:
        """Send, then queue the resolution row whatever happened; the result."""
        prepared, stamps = started.prepared, started.stamps
        response: dict[str, Any] = {}
        status = OrderStatus.ERROR
        error_message: str | None = None
        try:
            if started.failure is not None:
                raise started.failure
            answer = await self.client.place_order(
                started.body, stamps.order, dry_run=False, started=started.in_flight
            )
            if not has_order(answer):  # its fill columns are not an order's: none are kept
                raise ExchangeAmbiguous(f"answered without an order: {_quoted(answer)}")
            response = answer
            stamps.engine_ts_ms = engine_ts_ms(response)
            status = order_status(response, self.policy.time_in_force)
        except trio.Cancelled:
            error_message = CANCELLED_AT_SHUTDOWN
            raise
        except BaseException as error:
            error_message = _error_text(error)
            if isinstance(error, ExchangeError) and _outcome_unknown(error, stamps.order):
                error_message = OUTCOME_UNKNOWN_PREFIX + error_message
            raise
        finally:
            row = order_row(
                prepared,
                self.policy,
                OrderRowKind.RESOLUTION,
                started.requested_at_ms,
                status=status,
                error_message=error_message,
                response=response,
                submitted_at_ms=stamps.submitted_at_ms,
                acknowledged_at_ms=None if status is OrderStatus.ERROR else wall_ms(),
            )
            stamps.resolution = row
            with trio.move_on_after(RESOLUTION_TIMEOUT_S, shield=True):
                await self._record_answer(row, stamps.engine_ts_ms)
        fill_count = parse_fill_count(order_payload(response).get("fill_count"))
        return DispatchResult(status, fill_count)

    async def _record_answer(self, row: OrderRow, engine_ts_ms: int | None) -> None:
        """The answer's row, through the ledger when there is one (it merges the answer with
        whatever the stream said first, follows an open order and tells the risk gate of the
        fill); else straight to the sink."""
        if self.reconciler is None:
            await self.sink.record_order(row, timeout_s=RESOLUTION_TIMEOUT_S)
            return
        answer = dataclasses.replace(observed_row(row), exchange_ts_ms=engine_ts_ms)
        await self.reconciler.keeper.observe(
            answer, follow=True, sink=self.sink, timeout_s=RESOLUTION_TIMEOUT_S
        )

    def _record_intent(self, pending: RecordFields) -> None:
        """``pending`` to the intent journal, before the first byte; IntentNotRecorded if not."""
        try:
            self.sink.record_intent(pending)
        except JournalWriteError as error:
            raise IntentNotRecorded(str(error)) from None

    def _build_and_start(
        self, prepared: PreparedOrder, stamps: FireStamps
    ) -> tuple[bytes, OrderInFlight | None]:
        # Build to send: stamps and clocks only, no telemetry, no logging, no file system
        # (tests/exchange/test_order_path.py reads this function's syntax tree). The request is
        # written here when the transport can do it without waiting; else the task sends it.
        stamps.build_start_ns = stamp_ns()
        body = order_body(self._spec(prepared))
        stamps.build_end_ns = stamp_ns()
        stamps.submitted_at_ms = wall_ms()
        if self._send_now is None:
            return body, None
        return body, self._send_now(body, stamps.order)

    def _spec(self, prepared: PreparedOrder) -> OrderSpec:
        request = prepared.request
        return OrderSpec(
            ticker=request.template.market_ticker,
            client_order_id=prepared.client_order_id,
            side=request.template.side,
            count=request.count,
            price=request.price,
            time_in_force=self.policy.time_in_force,
            self_trade_prevention_type=self.policy.self_trade_prevention_type,
            exchange_index=request.exchange_index,
            cancel_order_on_pause=self.policy.cancel_order_on_pause,
            order_group_id=self.policy.order_group_id,
        )

    def rejected_row(self, request: FireRequest, reason: str) -> OrderRow:
        """The ``rejected`` row of a real fire refused before dispatch (DISPATCH.md §4 step 8)."""
        return rejected_row(request, self.policy, reason, self.ids.mint())

    async def record_rejected(self, request: FireRequest, reason: str) -> None:
        """Queue the ``rejected`` row (undroppable; shielded and bounded like the resolution)."""
        row = self.rejected_row(request, reason)
        with trio.move_on_after(RESOLUTION_TIMEOUT_S, shield=True):
            await self.sink.record_order(row, timeout_s=RESOLUTION_TIMEOUT_S)


REHEARSAL_ORDER_ID: Final = "rehearsal"
"""The ``client_order_id`` a rehearsal's throwaway body carries (it is never sent)."""

ANSWER_QUOTE_CHARS: Final = 200
"""How much of an answer without an order its error text quotes: enough to show what came."""


def _quoted(response: dict[str, Any]) -> str:
    text = repr(response)
    return text if len(text) <= ANSWER_QUOTE_CHARS else text[:ANSWER_QUOTE_CHARS] + "..."


def _error_text(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _outcome_unknown(error: ExchangeError, stamps: OrderStamps) -> bool:
    """Whether a failed order may have been placed (any attempt), so only the exchange knows."""
    return error.maybe_placed or stamps.maybe_placed


__all__ = [
    "FILL_COLUMNS",
    "REHEARSAL_ORDER_ID",
    "RESOLUTION_TIMEOUT_S",
    "DispatchResult",
    "OrderDispatcher",
    "OrderPlacer",
    "OrderPolicy",
    "OrderSink",
    "OrderStarter",
    "PreparedOrder",
    "StartedOrder",
    "order_correlation_id",
    "order_status",
]
