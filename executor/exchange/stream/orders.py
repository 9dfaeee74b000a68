"""What the exchange's stream changes: followed orders' rows, the risk gate, lookups waiting.

The stream (``executor.exchange.stream.client``) hands every message it reads to
:meth:`StreamedOrders.apply`. The orders it can change are the ones the reconciler follows
(:attr:`~executor.exchange.follow.reconcile.Reconciler.followed`: resting good_till_canceled orders,
orders answered without a fill count, and orders of unknown outcome); every other order's outcome
came with its own response.

Both kinds are observations handed to the order ledger (``executor.exchange.follow.ledger``),
which merges them forward only, writes the row and tells the risk gate, once per contract:

- A ``user_order`` message carries the order's totals, so it is applied as a lookup's answer
  would be (:meth:`~executor.exchange.follow.reconcile.Reconciler.update`), dated by its
  ``ts_ms``: an older total than the row's changes nothing and never lowers the fill fence.
- A ``fill`` message carries one execution: a *maker* fill of a followed order (it rested and
  was taken) adds its contracts to the row and to the risk gate at once. A taker fill happened as
  the order arrived and is in the order's own response. A fill is already counted, and skipped,
  when the engine's time of it (``ts_ms``) is no later than the last total the ledger applied to
  the order (a ``user_order``, a lookup, the answer) or than the end of the reconciliation that
  made the stream trusted, or when its trade was applied already. So a fill is never counted
  twice; one skipped wrongly is brought by the order's next total. An order of unknown outcome
  takes no single fill: its ``user_order`` total (or its lookup) reconciles the row whole, with
  its cause, and tells the risk gate of every contract. A fill may name its order by the
  exchange's ``order_id`` only.
- A ``user_order`` message for an order not followed is kept (:class:`StreamFeed`, the last
  :data:`RECENT_ORDERS`): a lookup waiting on that order takes it instead of asking again (the
  reconciler's :class:`~executor.exchange.follow.reconcile_terms.OrderFeed`), and an order
  followed after its message came (a fill between the exchange's answer and the dispatcher reading
  it) is caught up by :meth:`StreamedOrders.catch_up`, which one task at a time runs.

Every row the stream changes leaves a ``stream_row`` latency row ([ours]): ``started_at_ms`` is
the exchange's ``ts_ms`` of the change, ``ended_at_ms`` when the row was handed to telemetry, so
``duration_ms`` is the stream-to-row lag, clock offset between the exchange and this host
included (on the fake both clocks are this host's).
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Final, Protocol

import orjson
import structlog
import trio

from executor.clock import wall_ms
from executor.exchange.follow.ledger import single_fill
from executor.exchange.follow.lookup import ExchangeOrder
from executor.exchange.follow.observation import Observation, Source
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.stream.messages import (
    OtherMessage,
    StreamFill,
    StreamMessage,
    StreamOrder,
    StreamRefusal,
    Subscribed,
)
from executor.recording.rows import (
    LatencyRow,
    OrderRow,
    OrderRowKind,
    OrderStatus,
    Stage,
    latency_row,
)

log = structlog.get_logger()

RECENT_ORDERS: Final = 1000
"""``user_order`` states kept for orders not followed (an order's few hundred bytes each): far
more than the orders a lookup can be waiting on at once (the risk gate allows 2 in flight)."""


class StreamSink(Protocol):
    """The part of ``executor.telemetry.Telemetry`` the stream writes to."""

    def record(self, row: LatencyRow) -> None: ...

    async def record_order(self, row: OrderRow, *, timeout_s: float = ...) -> None: ...


def fill_observation(client_order_id: str, fill: StreamFill) -> Observation:
    """A ``fill`` message as the ledger's observation of one execution of the order."""
    return Observation(
        client_order_id,
        Source.STREAM_FILL,
        OrderStatus.FILLED,
        kalshi_order_id=fill.order_id,
        exchange_ts_ms=fill.ts_ms,
        trade_id=fill.trade_id,
        fill_added=fill.contracts,
        fill_price=fill.yes_price,
        fill_fee=fill.fee,
    )


def filled_row(row: OrderRow, fill: StreamFill) -> OrderRow:
    """``row`` after ``fill``: fill and remaining counts moved, averages re-weighted, ``filled``.

    The averages are on the YES side per contract (the order response's terms), fees per
    contract; the exchange's order id is taken from the fill when the row has none.
    """
    updated = single_fill(row, fill_observation(row.client_order_id, fill))
    return dataclasses.replace(updated, kind=OrderRowKind.RESOLUTION)


class StreamFeed:
    """``user_order`` states of orders not followed, kept for a lookup that waits on them (the
    reconciler's :class:`~executor.exchange.follow.reconcile_terms.OrderFeed`)."""

    def __init__(self) -> None:
        self._recent: OrderedDict[str, StreamOrder] = OrderedDict()
        self._arrived = trio.Event()

    def known(self, client_order_id: str) -> ExchangeOrder | None:
        """The last state the stream reported of an order not followed, if any."""
        message = self._recent.get(client_order_id)
        return None if message is None else message.order

    async def wait(self, client_order_ids: Collection[str], seconds: float) -> None:
        """Wait ``seconds``, or less if the stream reports one of ``client_order_ids``."""
        with trio.move_on_after(seconds):
            while not any(known in self._recent for known in client_order_ids):
                await self._arrived.wait()

    def keep(self, message: StreamOrder) -> None:
        """Keep ``message`` (the oldest kept goes beyond :data:`RECENT_ORDERS`); wake waiters."""
        key = message.order.client_order_id
        self._recent[key] = message
        self._recent.move_to_end(key)
        while len(self._recent) > RECENT_ORDERS:
            self._recent.popitem(last=False)
        self._arrived.set()
        self._arrived = trio.Event()

    def take(self, wanted: Collection[str]) -> list[StreamOrder]:
        """Remove and return the kept messages of ``wanted`` orders."""
        return [self._recent.pop(key) for key in list(self._recent) if key in wanted]

    def clear(self) -> None:
        """Forget everything kept (the stream is down: a lookup must ask again)."""
        self._recent.clear()


class StreamedOrders:
    """Applies the stream's messages (module docstring); the reconciler's :class:`OrderFeed`.

    Args:
        reconciler: follows the orders the stream may change (its keeper owns their rows).
        sink: where ``stream_row`` rows go (the order rows go through the ledger's keeper).
        feed: where messages of orders not followed are kept (None: one of its own; the
            reconciler is given the same one).
        clock_ms: wall-clock ms, fractional (the lag's end).
    """

    def __init__(
        self,
        reconciler: Reconciler,
        sink: StreamSink,
        *,
        feed: StreamFeed | None = None,
        clock_ms: Callable[[], float] = lambda: time.time_ns() / 1_000_000,
    ) -> None:
        self.reconciler = reconciler
        self.feed = feed or StreamFeed()
        self._sink = sink
        self._clock_ms = clock_ms
        self.trusted = False
        """True once a reconciliation has followed a (re)connect, until the stream drops."""
        self.fill_messages = 0
        self.order_messages = 0
        self.other_messages = 0
        self.malformed_messages = 0
        """Messages that could not be read (skipped, a rate-limited warning each)."""
        self.fills_applied = 0
        """Fill messages that changed a row (and the risk gate)."""
        self.orders_applied = 0
        """``user_order`` messages that changed a row."""
        self.last_lag_ms: float | None = None
        """The last stream-to-row lag (ms; the exchange's clock to ours)."""
        self._trusted_since_ms = 0
        self._catching_up = trio.Lock()

    # ------------------------------------------------------------ the reconciler's feed

    def known(self, client_order_id: str) -> ExchangeOrder | None:
        """The last state the stream reported of an order not followed, if any."""
        return self.feed.known(client_order_id)

    async def wait(self, client_order_ids: Collection[str], seconds: float) -> None:
        """Wait ``seconds``, or less if the stream reports one of ``client_order_ids``."""
        await self.feed.wait(client_order_ids, seconds)

    # ------------------------------------------------------------ connection life

    def untrust(self) -> None:
        """The stream is down (or not yet reconciled): forget what it said of orders not
        followed (a lookup must ask again) and count no fill until the next reconciliation."""
        self.trusted = False
        self.feed.clear()

    async def reconcile_followed(self) -> bool:
        """Look every followed order up once (rows and the risk gate follow), then trust the
        stream; False (still untrusted) when the exchange could not be asked about one."""
        self.untrust()
        followed = self.reconciler.open_orders()  # each with its cause, if it has one
        if followed:
            resolutions = await self.reconciler.reconcile(followed, tries=1)
            unanswered = [r for r in resolutions if r.error is not None]
            if unanswered:
                log.warning(
                    "stream reconciliation failed: the stream is not trusted yet",
                    orders=len(unanswered),
                    error=unanswered[0].error,
                )
                return False
        self._trusted_since_ms = wall_ms()
        self.trusted = True
        return True

    # ------------------------------------------------------------ messages

    async def apply(self, message: StreamMessage) -> None:
        """Apply one message (the module docstring says what each kind changes)."""
        if isinstance(message, StreamFill):
            self.fill_messages += 1
            await self._fill(message)
        elif isinstance(message, StreamOrder):
            self.order_messages += 1
            await self._order(message)
        elif isinstance(message, (OtherMessage, Subscribed, StreamRefusal)):
            self.other_messages += 1

    async def catch_up(self) -> None:
        """Apply kept ``user_order`` states of orders followed since their message came.

        One task at a time (the reader and the keep-alive both call it): each kept message is
        taken before the first await, so none is applied twice or looked for after it went.
        """
        async with self._catching_up:
            for message in self.feed.take(self.reconciler.followed):
                await self._order(message)

    async def _order(self, message: StreamOrder) -> None:
        order = message.order
        row = self.reconciler.followed.get(order.client_order_id)
        if row is None:
            self.feed.keep(message)
            return
        if not await self.reconciler.update(order, message.ts_ms):
            return
        queued_ms = self._clock_ms()
        self.orders_applied += 1
        self._lag_row(row, message.ts_ms, "user_orders", queued_ms)

    def _followed_by_order_id(self, order_id: str) -> OrderRow | None:
        for row in self.reconciler.followed.values():
            if row.kalshi_order_id == order_id:
                return row
        return None

    async def _fill(self, fill: StreamFill) -> None:
        if fill.is_taker or not self.trusted:
            return  # in the order's own response / covered by the coming reconciliation
        followed = self.reconciler.followed
        row = followed.get(fill.client_order_id or "") or self._followed_by_order_id(fill.order_id)
        if row is None or followed.cause_of(row.client_order_id) is not None:
            return  # an order of unknown outcome: its lookup (or a user_order) settles it whole
        if fill.ts_ms <= self._trusted_since_ms:
            return  # the reconciliation that made the stream trusted covers it
        change = await self.reconciler.keeper.observe(fill_observation(row.client_order_id, fill))
        if change.row is None:
            return  # covered by a total the ledger applied, or this trade came before
        updated = change.row
        queued_ms = self._clock_ms()  # the lag ends here, not after the bookkeeping and the log
        self.fills_applied += 1
        log.info(
            "resting order filled (stream)",
            client_order_id=row.client_order_id,
            ticker=row.ticker,
            contracts=str(fill.contracts),
            fill_count=updated.fill_count,
            status=str(updated.status),
        )
        self._lag_row(row, fill.ts_ms, "fill", queued_ms)

    def _lag_row(self, row: OrderRow, exchange_ts_ms: int, channel: str, queued_ms: float) -> None:
        """The ``stream_row`` row: the exchange's time of the change to its row queued (at
        ``queued_ms``)."""
        now_ms = queued_ms
        lag_ms = now_ms - exchange_ts_ms
        self.last_lag_ms = lag_ms
        metadata = orjson.dumps(
            {"channel": channel, "client_order_id": row.client_order_id, "clock": "exchange"}
        ).decode()
        self._sink.record(
            latency_row(
                row.correlation_id, Stage.STREAM_ROW, exchange_ts_ms, int(now_ms), lag_ms, metadata
            )
        )


__all__ = ["RECENT_ORDERS", "StreamSink", "StreamedOrders", "filled_row"]
