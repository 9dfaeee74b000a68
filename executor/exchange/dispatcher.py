"""The dispatcher: executes a decided order, from its ``client_order_id`` to its audit row (§4).

The decision (``executor.decide.decision``) has already passed the production guard, the kill
switch and the risk gate. :meth:`OrderDispatcher.execute` places a real order and keeps the risk
gate's books through the order's :class:`~executor.decide.decision.RiskTicket` (attempt and
in-flight count before the send, the fill after it, the in-flight count back down whatever
happened); :meth:`OrderDispatcher.record_rejected` writes a refusal's ``rejected`` row.

A real fire: mint a ``client_order_id``, queue the ``pending`` row without waiting, build the body
from the template, hand it to the transport, read the status from the response, and queue the
``resolution`` row whatever happened (success, error, cancellation). A shadow fire is built here
the same way and then signed by the shadow lane (``executor.exchange.shadow_lane``); it writes no
order row.

Before anything is sent, the order's **intent record** (its pending row) is appended to the intent
journal (``OrderSink.record_intent``, one ``os.write``: ``executor.recording.intent_journal``), so
an order whose first byte left is known after a SIGKILL. It is the one file-system call between
the decision and the send, made before the body is built (so ``_build_and_send`` stays free of
it), named :meth:`OrderDispatcher._record_intent` and measured in docs/RESULTS.md. A record that
cannot be written stops the order: nothing is sent, and the row says why (``error``,
``intent record not written ...``).

The pending row is queued *before* the body is built (the reference queues it after): DISPATCH.md
§1 step 6 allows nothing that touches telemetry between building the order and handing the
request to the transport, and the pending row needs nothing the body has. ``_build_and_send`` is
that stretch, and a test reads its syntax tree to keep it free of telemetry, logging and files.

Every stamp goes into a :class:`~executor.exchange.stages.FireStamps` the caller owns, so a
dispatch that raises or is cancelled still leaves the stamps it reached for the stage rows.

An order whose outcome is unknown (the transport's ``maybe_placed``: a timeout after sending, a
connection lost after sending, a 5xx) resolves as ``error`` with ``error_message`` beginning
``"outcome unknown: "``, and then, with a reconciler, is looked up on the exchange
(``executor.exchange.reconcile``): found, the dispatch returns the exchange's status and fill as
if the answer had come; not found or not answerable, the original error goes on. It is never
re-sent. An order that rests on the book (good_till_canceled) is handed to the reconciler to be
followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

import structlog
import trio

from executor.clock import stamp_ns, wall_ms
from executor.decide.decision import Order, Permission
from executor.decide.order_request import FireRequest
from executor.exchange.messages import (
    ExchangeError,
    OrderSpec,
    OrderStamps,
    order_body,
    order_payload,
    order_status,
    parse_fill_count,
)
from executor.exchange.order_rows import (
    PreparedOrder,
    order_correlation_id,
    order_row,
    rejected_order_row,
)
from executor.exchange.reconcile import Reconciler
from executor.exchange.stages import FireStamps
from executor.recording.installation import ClientOrderIds, new_prefix
from executor.recording.intent_journal import JournalWriteError
from executor.recording.open_orders import OUTCOME_UNKNOWN_PREFIX
from executor.recording.rows import (
    HeartbeatRow,
    LatencyRow,
    OrderRow,
    OrderRowKind,
    OrderStatus,
)

log = structlog.get_logger()

RESOLUTION_TIMEOUT_S: Final = 2.0
"""Longest a fire task waits for room for an undroppable order row (seconds), shielded from
cancellation so a shutdown still lands it (DISPATCH.md §4 step 7)."""

CANCELLED_AT_SHUTDOWN: Final = "cancelled at shutdown"
"""``error_message`` of a dispatch cut by shutdown ([ours]; the reference leaves it NULL)."""

INTENT_NOT_RECORDED: Final = "intent record not written, order not sent: "
"""How the ``error`` row of an order stopped by a failed intent record begins (then the cause)."""


class IntentNotRecorded(ExchangeError):
    """The order's intent record could not be written, so it was not sent (a definite error)."""


class OrderPlacer(Protocol):
    """The part of ``executor.exchange.transport.ExchangeClient`` a dispatcher uses."""

    async def place_order(
        self, body: bytes, stamps: OrderStamps, *, dry_run: bool
    ) -> dict[str, Any]: ...


class OrderSink(Protocol):
    """The part of ``executor.telemetry.Telemetry`` the order path writes to."""

    def record(self, row: LatencyRow) -> None: ...

    def record_intent(self, row: OrderRow) -> None: ...

    def record_pending(self, row: OrderRow) -> None: ...

    async def record_order(
        self, row: OrderRow | HeartbeatRow, *, timeout_s: float = RESOLUTION_TIMEOUT_S
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class OrderPolicy:
    """How orders are placed: the configured order flags and where they may go.

    Attributes:
        time_in_force: ``fill_or_kill``, ``good_till_canceled`` or ``immediate_or_cancel``.
        self_trade_prevention_type: ``taker_at_cross`` or ``maker``.
        environment: ``demo`` or ``prod``.
        allow_production: ``KALSHI_ALLOW_PRODUCTION_ORDERS``.
    """

    time_in_force: str = "fill_or_kill"
    self_trade_prevention_type: str = "taker_at_cross"
    environment: str = "demo"
    allow_production: bool = False

    @property
    def permission(self) -> Permission:
        """The production guard these flags make (the decision layer applies it)."""
        return Permission(self.environment, self.allow_production)


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """How a real dispatch ended (when it did not raise)."""

    status: OrderStatus
    fill_count: float | None


class OrderDispatcher:
    """Builds, sends and audits orders through one exchange client.

    Args:
        client: the transport.
        sink: where order rows go.
        policy: order flags (its production guard is applied by the decision, not here).
        reconciler: looks up orders whose outcome is unknown and follows resting ones; None
            leaves an unknown outcome as its ``error`` row (for a later start-up to resolve).
        ids: mints ``client_order_id`` values with this installation's prefix (None: a prefix
            of this process's own, for tests).
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
        self.sink = sink
        self.policy = policy
        self.reconciler = reconciler
        self.ids = ids or ClientOrderIds(new_prefix())

    def prepare(self, request: FireRequest) -> PreparedOrder:
        """Mint the order's ``client_order_id`` and its row's correlation id."""
        return PreparedOrder(
            request, self.ids.mint(), order_correlation_id(request.correlation_id)
        )

    def build_shadow(self, request: FireRequest, stamps: FireStamps) -> bytes:
        """A shadow fire's body, built exactly like a real one's (stamped for ``order_build``)."""
        prepared = self.prepare(request)
        stamps.build_start_ns = stamp_ns()
        body = order_body(self._spec(prepared))
        stamps.build_end_ns = stamp_ns()
        return body

    async def execute(self, order: Order, stamps: FireStamps) -> DispatchResult:
        """Place a decided real order, keeping the risk gate's books (DISPATCH.md §1 steps 5-7).

        The attempt and one dispatch in flight are recorded before the send; the response's fill
        is fed to the gate; the in-flight count comes back down whatever happened.

        Raises:
            Exception: whatever :meth:`dispatch` raised.

        Cancellation: as :meth:`dispatch`; the in-flight count still comes back down.
        """
        ticket = order.ticket
        if ticket is None:
            return await self.dispatch(order.request, stamps)
        ticket.sending()
        try:
            result = await self.dispatch(order.request, stamps)
            ticket.filled(result.fill_count)
        finally:
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
        prepared = self.prepare(request)
        requested_at_ms = wall_ms()
        try:
            result, row = await self._send_and_resolve(prepared, stamps, requested_at_ms)
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
        if self.reconciler is not None:
            self.reconciler.follow(row)
        return result

    async def _send_and_resolve(
        self, prepared: PreparedOrder, stamps: FireStamps, requested_at_ms: int
    ) -> tuple[DispatchResult, OrderRow]:
        """Record the intent, queue the pending row, send, then queue the resolution row
        whatever happened; the result and that row."""
        response: dict[str, Any] = {}
        status = OrderStatus.ERROR
        error_message: str | None = None
        try:
            pending = self._row(prepared, OrderRowKind.PENDING, requested_at_ms)
            self._record_intent(pending)
            self.sink.record_pending(pending)
            response = await self._build_and_send(prepared, stamps)
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
            row = self._row(
                prepared,
                OrderRowKind.RESOLUTION,
                requested_at_ms,
                status=status,
                error_message=error_message,
                response=response,
                submitted_at_ms=stamps.submitted_at_ms,
                acknowledged_at_ms=None if status is OrderStatus.ERROR else wall_ms(),
            )
            stamps.resolution = row
            with trio.move_on_after(RESOLUTION_TIMEOUT_S, shield=True):
                await self.sink.record_order(row, timeout_s=RESOLUTION_TIMEOUT_S)
        fill_count = parse_fill_count(order_payload(response).get("fill_count"))
        return DispatchResult(status, fill_count), row

    def _record_intent(self, pending: OrderRow) -> None:
        """The intent record: ``pending`` in the intent journal before the first byte leaves.

        Raises:
            IntentNotRecorded: the journal refused it; the order must not be sent.
        """
        try:
            self.sink.record_intent(pending)
        except JournalWriteError as error:
            raise IntentNotRecorded(INTENT_NOT_RECORDED + str(error)) from None

    async def _build_and_send(self, prepared: PreparedOrder, stamps: FireStamps) -> dict[str, Any]:
        # Build to send: stamps and clocks only, no telemetry, no logging, no file system
        # (tests/exchange/test_order_path.py reads this function's syntax tree).
        stamps.build_start_ns = stamp_ns()
        body = order_body(self._spec(prepared))
        stamps.build_end_ns = stamp_ns()
        stamps.submitted_at_ms = wall_ms()
        return await self.client.place_order(body, stamps.order, dry_run=False)

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
        )

    def rejected_row(self, request: FireRequest, reason: str) -> OrderRow:
        """The ``rejected`` row of a real fire refused before dispatch (DISPATCH.md §4 step 8)."""
        policy = self.policy
        return rejected_order_row(
            request,
            reason,
            self.ids.mint(),
            time_in_force=policy.time_in_force,
            self_trade_prevention_type=policy.self_trade_prevention_type,
        )

    async def record_rejected(self, request: FireRequest, reason: str) -> None:
        """Queue the ``rejected`` row (undroppable; shielded and bounded like the resolution)."""
        row = self.rejected_row(request, reason)
        with trio.move_on_after(RESOLUTION_TIMEOUT_S, shield=True):
            await self.sink.record_order(row, timeout_s=RESOLUTION_TIMEOUT_S)

    def _row(
        self,
        prepared: PreparedOrder,
        kind: OrderRowKind,
        requested_at_ms: int,
        **columns: Any,
    ) -> OrderRow:
        return order_row(
            prepared,
            kind,
            requested_at_ms,
            time_in_force=self.policy.time_in_force,
            self_trade_prevention_type=self.policy.self_trade_prevention_type,
            **columns,
        )


def _error_text(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _outcome_unknown(error: ExchangeError, stamps: OrderStamps) -> bool:
    """Whether a failed order may have been placed (any attempt), so only the exchange knows."""
    return error.maybe_placed or stamps.maybe_placed
