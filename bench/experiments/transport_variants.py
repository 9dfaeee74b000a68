"""Experiments on the order transport: how a real order is written and its answer read, each
the other side of an A/B whose winner the product adopted (``bench.experiments.variants`` applies
them by name, beside its other variants). Variants:

- ``httpx-orders``: orders go through the httpx client again, the way the transport sent them
  before the order connections (2026-12-01): an ``httpx.Request(...)`` from headers merged once
  (the former ``direct-request`` variant, which that transport had adopted), signed inline. It
  writes no ``wire`` stamp (httpx does not say when its last byte left), so it has no
  ``detect_wire`` rows; its ``detect_fire`` and ``dispatch_ack`` compare with the product's.
- ``h11-responses``: order responses are parsed by h11 again (told of each request, then fed
  every byte), as the order connection did before llhttp (2026-12-01): the round trip's A/B.
- ``task-writes``: a real order is decided where its wake is acked but written from its fire's
  own task, after the batch's rows and shadow fires (``send_order_now`` always declines): the
  A/B of writing it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import h11
import httpx

from executor.clock import stamp_ns, wall_ms
from executor.exchange.orders import transport as exchange


def _patch_httpx_orders() -> None:
    async def order_attempt(
        self: exchange.ExchangeClient, body: bytes, stamps: exchange.OrderStamps, *, dry_run: bool
    ) -> dict[str, Any]:
        stamps.reset()
        stamps.attempts += 1
        if not dry_run:
            await self.limiter.acquire(exchange.TOKENS_PER_ORDER)
        cached = getattr(self, "_bench_direct", None)
        if cached is None:
            # Once per client: the URL and the client's default headers, merged the way
            # build_request would, and the timeout extension.
            url = self.rest._http.base_url.join(exchange.ORDER_PATH)
            defaults = list(self.rest._http.headers.multi_items())
            timeout = httpx.Timeout(
                exchange.ORDER_TIMEOUT_S, connect=exchange.ORDER_CONNECT_TIMEOUT_S
            )
            extensions = {"timeout": timeout.as_dict()}
            cached = (url, defaults, extensions)
            self._bench_direct = cached  # type: ignore[attr-defined]
        url, defaults, extensions = cached
        timestamp = str(wall_ms())
        stamps.sign_start_ns = stamp_ns()
        if dry_run and self.shadow_signer is not None:
            signature = await self.shadow_signer(timestamp, "POST", exchange.ORDER_PATH)
        else:
            signature = self._signer.sign(timestamp, "POST", exchange.ORDER_PATH)
        stamps.sign_end_ns = stamp_ns()
        stamps.signature = "inline"
        headers = [*defaults, *self.rest._headers(timestamp, signature, with_body=True).items()]
        request = httpx.Request("POST", url, content=body, headers=headers, extensions=extensions)
        stamps.sent_ns = stamp_ns()
        if dry_run:
            return {}
        response = await self.rest._send(request, exchange.ORDER_TIMEOUT_S)
        stamps.ack_ns = stamp_ns()
        return exchange.parse_response(response)

    exchange.ExchangeClient._order_attempt = order_attempt  # type: ignore[method-assign]
    _patch_task_writes()  # every attempt goes through the patched _order_attempt


def _patch_task_writes() -> None:
    def send_order_now(
        self: exchange.ExchangeClient, body: bytes, stamps: exchange.OrderStamps
    ) -> None:
        return None

    exchange.ExchangeClient.send_order_now = send_order_now  # type: ignore[method-assign]


class _H11Reader:
    """``ResponseReader``'s surface over one h11 client connection, kept per order connection."""

    def __init__(self, protocol: h11.Connection, events: tuple[Any, ...]) -> None:
        self._protocol = protocol
        for event in events:
            protocol.send(event)
        self._chunks: list[bytes] = []
        self.status, self.reason, self.complete = 0, "", False

    def feed(self, data: bytes) -> bool:
        protocol = self._protocol
        protocol.receive_data(data)
        while True:
            event = protocol.next_event()
            if event is h11.NEED_DATA:
                return False
            if isinstance(event, h11.Response):
                self.status, self.reason = event.status_code, event.reason.decode("latin-1")
            elif isinstance(event, h11.Data):
                self._chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.complete = True
                return True
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("closed without answering")

    @property
    def body(self) -> bytes:
        return b"".join(self._chunks)

    @property
    def reusable(self) -> bool:
        protocol = self._protocol
        if protocol.our_state is h11.DONE and protocol.their_state is h11.DONE:
            protocol.start_next_cycle()
            return True
        return False


def _patch_h11_responses() -> None:
    from executor.exchange.orders.connection import OrderConnection

    def new_reader(self: OrderConnection, body: bytes) -> Any:
        protocol = getattr(self, "_bench_h11", None)
        if protocol is None:
            protocol = h11.Connection(h11.CLIENT)
            self._bench_h11 = protocol  # type: ignore[attr-defined]
        return _H11Reader(protocol, self.template.h11_events(body))

    OrderConnection._new_reader = new_reader  # type: ignore[method-assign]


TRANSPORT_VARIANTS: Final[dict[str, Callable[[], None]]] = {
    "httpx-orders": _patch_httpx_orders,
    "h11-responses": _patch_h11_responses,
    "task-writes": _patch_task_writes,
}
"""The transport's variants by name (merged into ``bench.experiments.variants.VARIANTS``)."""


__all__ = ["TRANSPORT_VARIANTS"]
