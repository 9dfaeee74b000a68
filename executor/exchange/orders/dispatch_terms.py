"""The dispatcher's terms: what it needs of the transport and of telemetry, and what it hands
between the two halves of a real order (``executor.exchange.orders.dispatcher``).

``OrderPlacer`` and ``OrderStarter`` are the parts of the transport a dispatcher uses (the second
optional: a transport that can write an order's first attempt without waiting; the part of
telemetry it writes to is ``executor.exchange.protocols.OrderSink``); :class:`StartedOrder` is what
:meth:`OrderDispatcher.begin` leaves for :meth:`OrderDispatcher.complete`, and
:class:`DispatchResult` how a real dispatch ended. Plain values and protocols, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from executor.decide.decision import Order
from executor.exchange.messages import OrderStamps
from executor.exchange.orders.connection import OrderInFlight
from executor.exchange.orders.rows import PreparedOrder
from executor.exchange.orders.stages import FireStamps
from executor.recording.rows import OrderStatus


class OrderPlacer(Protocol):
    """The part of ``executor.exchange.orders.transport.ExchangeClient`` a dispatcher uses."""

    async def place_order(
        self,
        body: bytes,
        stamps: OrderStamps,
        *,
        dry_run: bool,
        started: OrderInFlight | None = None,
    ) -> dict[str, Any]: ...


@runtime_checkable
class OrderStarter(Protocol):
    """A transport that can write a real order's first attempt without waiting (optional)."""

    def send_order_now(self, body: bytes, stamps: OrderStamps) -> OrderInFlight | None: ...


class StartedOrder:
    """A real order :meth:`OrderDispatcher.begin` began, for :meth:`OrderDispatcher.complete`.

    Attributes:
        order: the decided order (its risk ticket, when the gate is on).
        prepared: its ids.
        requested_at_ms: the ``pending`` row's ``requested_at_ms``.
        stamps: the fire's stamps.
        body: the order's bytes (empty when building failed).
        in_flight: the first attempt, when it was written without waiting.
        failure: what went wrong in ``begin``, raised by ``complete`` in its error handling.
    """

    __slots__ = ("body", "failure", "in_flight", "order", "prepared", "requested_at_ms", "stamps")

    def __init__(
        self, order: Order, prepared: PreparedOrder, requested_at_ms: int, stamps: FireStamps
    ) -> None:
        self.order = order
        self.prepared = prepared
        self.requested_at_ms = requested_at_ms
        self.stamps = stamps
        self.body = b""
        self.in_flight: OrderInFlight | None = None
        self.failure: Exception | None = None


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """How a real dispatch ended (when it did not raise)."""

    status: OrderStatus
    fill_count: float | None


__all__ = [
    "DispatchResult",
    "OrderPlacer",
    "OrderStarter",
    "StartedOrder",
]
