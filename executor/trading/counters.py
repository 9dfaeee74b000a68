"""Gathering the order path's counters: the one place that knows which object counts what.

``executor.recording.counting.counter_list`` names every counter and its owner; the owners that
exist only with an exchange (``ORDER_PATH_OWNERS``: reconciliation, the transport, the stream, the
book, the rate limits, adoption) keep their counts as plain attributes of their own objects. This
module reads them, so that neither the fire path nor the server imports those rooms to report them:
the assembly hands :func:`order_path_counters` to the fire path (``OrderPath.counters``), and
``FirePath.counters`` reports what it returns beside the fire path's own.
"""

from __future__ import annotations

from collections.abc import Callable

from executor.exchange.book.guard import BookGuard
from executor.exchange.follow.adoption import Adopter
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.halts import ExchangeHalts
from executor.exchange.orders.transport import ExchangeClient
from executor.exchange.stream.orders import StreamedOrders
from executor.exchange.stream.state import StreamState


def order_path_counters(
    client: ExchangeClient,
    reconciler: Reconciler,
    book: BookGuard,
    adopter: Adopter,
    stream: tuple[StreamedOrders, StreamState] | None = None,
    halts: ExchangeHalts | None = None,
) -> Callable[[], dict[str, int]]:
    """A function returning the order path's counters now, one per counter of the owners in
    ``ORDER_PATH_OWNERS`` (the stream's are 0 without ``stream``: ``--stream off``); the order
    group is triggered when the book guard or the exchange (``halts``) has it so.

    Cancellation: the returned function never checkpoints; it is called from the Trio thread
    (the exit line) and the metrics endpoint's thread (each value is one int read whole).
    """

    def halts_tripped() -> bool:
        return halts is not None and halts.group_tripped

    def gather() -> dict[str, int]:
        limits = client.rest.limits
        counts = {
            "reconciled": reconciler.reconciled,
            "reconcile_failed": reconciler.reconcile_failed,
            "lookups_unknown": reconciler.lookups_unknown,
            "orders_open": reconciler.orders_open,
            "presigned": client.presigned,
            "signed_inline": client.signed_inline,
            "cancels_sent": book.cancels_sent,
            "cancels_failed": book.cancels_failed,
            "order_group_triggered": int(book.group_triggered or halts_tripped()),
            "trading_paused": int(halts is not None and halts.paused),
            "write_token_waits": limits.write.waits,
            "read_token_waits": limits.read.waits,
            "adopted": adopter.adopted,
            "foreign_orders": adopter.foreign_orders,
            "stream_connected": 0,
            "stream_reconnects": 0,
            "stream_fill_messages": 0,
            "stream_order_messages": 0,
            "stream_fills_applied": 0,
            "stream_orders_applied": 0,
        }
        if stream is not None:
            orders, state = stream
            counts.update(
                stream_connected=state.connected,
                stream_reconnects=state.reconnects,
                stream_fill_messages=orders.fill_messages,
                stream_order_messages=orders.order_messages,
                stream_fills_applied=orders.fills_applied,
                stream_orders_applied=orders.orders_applied,
            )
        return counts

    return gather


__all__ = ["order_path_counters"]
