"""Reconciliation: asking the exchange what became of an order whose outcome we do not know.

DISPATCH.md never retries a timed-out order (it may have been placed), and the reference stops
there: the row says ``error`` and the risk gate never hears of the fill. Here an order whose
outcome is unknown is looked up by its ``client_order_id`` (``executor.exchange.order_lookup``)
and its ``orders_fired`` row is corrected with the exchange's truth. It is never re-sent: a late
order is worse than none. Three callers:

- the dispatcher, right after an ambiguous failure (a timeout after the request may have been
  written, a connection lost after sending, a 5xx on the last attempt): :meth:`Reconciler.resolve`
  looks the order up, up to ``RECONCILE_TRIES`` times over a few seconds (an order just sent may
  not be listed yet), and the fire continues with the truth (its fill goes to the risk gate);
- start-up, before the socket is published: :meth:`Reconciler.reconcile_at_startup` takes the
  rows an earlier run left unresolved (``executor.recording.open_orders``), so the risk gate's
  warm start reads a corrected table, and logs one summary line;
- the account poll: :meth:`Reconciler.poll_resting` follows orders still resting on the book
  (good_till_canceled) until they fill or are cancelled, and tells the risk gate of each fill
  (an order answered without a fill count, ``submitted``, is followed the same way).

What a row becomes: found -> the exchange's status (filled, canceled, or accepted while it
rests), ``kalshi_order_id`` and fill columns, ``error_message`` "reconciled with the exchange
after: {cause}"; answered without it after every try -> ``error``, "the exchange has no such order
after: {cause}"; never answered -> the row is left as it was (a later start-up asks again).
Counted in ``reconciled`` / ``reconcile_failed``, one log line each.

With a :attr:`Reconciler.feed` (the exchange's stream, ``executor.exchange.stream_orders``), an
order the stream has already reported is taken as found without a lookup, and a wait between two
lookups ends as soon as the stream reports one of the orders waited for. The stream also brings a
followed order's news through :meth:`Reconciler.update`.

Knows nothing of telemetry or the risk gate: rows go to an :class:`OrderRowSink`, fills to a
:class:`FillRecorder` (``executor.telemetry.Telemetry`` and ``executor.decide.risk.RiskGate`` fit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import structlog
import trio

from executor.clock import wall_ms
from executor.exchange.messages import ExchangeError
from executor.exchange.order_lookup import ExchangeOrder, SignedReader, find_orders
from executor.exchange.reconcile_terms import (
    CollectedRows,
    FillRecorder,
    OrderFeed,
    OrderRowSink,
    Resolution,
    StartupSummary,
    Unresolved,
    Verdict,
)
from executor.recording.open_orders import (
    NO_SUCH_ORDER_PREFIX,
    RECONCILED_PREFIX,
    rests,
    startup_cause,
)
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus

log = structlog.get_logger()

RECONCILE_TRIES: Final = 4
"""Lookups of an order just sent before it is called absent: the exchange lists an order once it
has processed it, which may be after our timeout gave up."""

RECONCILE_DELAYS_S: Final = (0.5, 1.0, 2.0)
"""Waits between those lookups (seconds): 3.5 s in all, "a few seconds"; a guess at how late an
exchange under load lists an order, not a measurement."""

LOOKUP_TIMEOUT_S: Final = 5.0
"""Budget of one lookup, every page included (seconds): half the transport's 10 s read budget,
so four tries cannot hold a fire for a minute."""

MIN_TS_MARGIN_S: Final = 60
"""How far before the order's send time the lookup starts (seconds): our clock and the
exchange's may disagree; a minute more of one ticker's orders is a page at most."""

SETTLED_AFTER_MS: Final = 30_000
"""At start-up, a row sent longer ago than this (ms) is looked up once: the exchange has long
listed it if it has it. Younger rows get the full tries."""


def _filled(row: OrderRow) -> float:
    try:
        return float(row.fill_count or "0")
    except ValueError:
        return 0.0


class Reconciler:
    """Looks orders up on the exchange and corrects their rows; follows resting orders.

    Args:
        reader: signed GETs (the transport).
        sink: where corrected rows are queued.
        fills: told of fills learned while following resting orders (the risk gate), or None.
        delays_s: waits between tries (None: ``RECONCILE_DELAYS_S``, read when made).
        clock: wall-clock ms.
    """

    def __init__(
        self,
        reader: SignedReader,
        sink: OrderRowSink,
        *,
        fills: FillRecorder | None = None,
        delays_s: Sequence[float] | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._reader = reader
        self.sink = sink
        self.fills = fills
        self._delays_s = tuple(RECONCILE_DELAYS_S if delays_s is None else delays_s)
        self._clock = clock
        self.reconciled = 0
        self.reconcile_failed = 0
        self.followed: dict[str, OrderRow] = {}
        """Orders followed on the book (resting, or answered without a fill count), by id."""
        self.feed: OrderFeed | None = None
        """Orders the exchange told of unasked (the stream), taken before asking again."""

    @property
    def resting(self) -> int:
        """Orders being followed on the book."""
        return len(self.followed)

    def follow(self, row: OrderRow) -> None:
        """Follow ``row``'s order with the account poll while it may still change: it rests
        (:func:`rests`), or the exchange answered without a fill count (``submitted``)."""
        if rests(row) or row.status is OrderStatus.SUBMITTED:
            self.followed[row.client_order_id] = row

    async def resolve(self, row: OrderRow, cause: str) -> Resolution:
        """Look one order up with every try (the dispatcher's call after an ambiguous failure).

        Cancellation: a lookup cut short leaves the row as it was (``error``, outcome unknown),
        for the next start-up to resolve.
        """
        (resolution,) = await self.reconcile([Unresolved(row, cause)], tries=RECONCILE_TRIES)
        return resolution

    async def reconcile(
        self,
        orders: Sequence[Unresolved],
        *,
        tries: int,
        tell_fills: bool = True,
        sink: OrderRowSink | None = None,
    ) -> list[Resolution]:
        """Look ``orders`` up (grouped by ticker), up to ``tries`` times, and write what is learned.

        ``tell_fills``: a resting order's new fills go to :attr:`fills` (not at start-up, where
        the warm start reads them from the corrected rows). ``sink`` replaces the reconciler's
        own for these rows. Returns one :class:`Resolution` per order, in the order given.
        """
        pending = {order.row.client_order_id: order for order in orders}
        found: dict[str, ExchangeOrder] = {}
        errors: dict[str, str] = {}
        for attempt in range(max(1, tries)):
            if attempt:
                delay_s = self._delays_s[min(attempt, len(self._delays_s)) - 1]
                if self.feed is None:
                    await trio.sleep(delay_s)
                else:  # the stream may tell of them before the next lookup is due
                    await self.feed.wait(pending, delay_s)
            if self.feed is not None:
                _take_fed(self.feed, pending, found)
            for ticker, group in _by_ticker(pending.values()).items():
                ids = [order.row.client_order_id for order in group]
                try:
                    with trio.fail_after(LOOKUP_TIMEOUT_S):
                        hits = await find_orders(self._reader, ticker, _min_ts_s(group), ids)
                except (ExchangeError, trio.TooSlowError) as error:
                    text = str(error) or f"no answer within {LOOKUP_TIMEOUT_S:g} s"
                    errors.update(dict.fromkeys(ids, text))
                    continue
                for client_order_id in ids:
                    errors.pop(client_order_id, None)
                    if client_order_id in hits:
                        found[client_order_id] = hits[client_order_id]
                        del pending[client_order_id]
            if not pending:
                break
        writes_to = sink or self.sink
        return [
            await self._conclude(order, found, errors, tell_fills, writes_to) for order in orders
        ]

    async def reconcile_at_startup(
        self, rows: Sequence[OrderRow], sink: OrderRowSink | None = None
    ) -> StartupSummary:
        """Resolve an earlier run's unresolved rows; follow those still resting; log one line.

        ``sink``: where the corrections go (start-up collects them to commit before the warm
        start), instead of the reconciler's own.
        """
        if not rows:
            return StartupSummary()
        now_ms = self._clock()
        recent = any(now_ms - _sent_ms(row) < SETTLED_AFTER_MS for row in rows)
        resolutions = await self.reconcile(
            [Unresolved(row, startup_cause(row)) for row in rows],
            tries=RECONCILE_TRIES if recent else 1,
            tell_fills=False,
            sink=sink,
        )
        counts = dict.fromkeys(("filled", "canceled", "resting", "absent", "unanswered"), 0)
        for resolution in resolutions:
            if resolution.order is not None:
                kind = "resting" if resolution.order.resting else str(resolution.order.status)
            else:
                kind = resolution.verdict.value
            counts[kind] = counts.get(kind, 0) + 1
        summary = StartupSummary(**counts)
        log.info("start-up reconciliation", orders=len(rows), **dataclasses.asdict(summary))
        return summary

    async def poll_resting(self) -> None:
        """One look at every resting order; rows and the risk gate follow what changed.

        A failed lookup keeps following (one warning per poll, however many orders); an order the
        exchange no longer lists is dropped with a warning, its row left as it was.
        """
        if not self.followed:
            return
        orders = [Unresolved(row, None) for row in self.followed.values()]
        unanswered = [
            resolution
            for resolution in await self.reconcile(orders, tries=1)
            if resolution.verdict is Verdict.UNANSWERED
        ]
        if unanswered:
            log.warning(
                "resting orders lookup failed: still followed",
                orders=len(unanswered),
                error=unanswered[0].error,
            )

    async def update(self, exchange_order: ExchangeOrder) -> bool:
        """A followed order's news from elsewhere (the stream): its row and the risk gate follow,
        as after a poll. False (nothing done) for an order not followed."""
        row = self.followed.get(exchange_order.client_order_id)
        if row is None:
            return False
        await self._found(row, None, exchange_order, True, self.sink)
        return True

    async def _conclude(
        self,
        order: Unresolved,
        found: dict[str, ExchangeOrder],
        errors: dict[str, str],
        tell_fills: bool,
        sink: OrderRowSink,
    ) -> Resolution:
        """Write and log what was learned about ``order``; count it if it was unresolved."""
        row, cause = order.row, order.cause
        exchange_order = found.get(row.client_order_id)
        if exchange_order is not None:
            return await self._found(row, cause, exchange_order, tell_fills, sink)
        error = errors.get(row.client_order_id)
        fields = {"client_order_id": row.client_order_id, "ticker": row.ticker, "cause": cause}
        if cause is None:
            if error is not None:  # kept; poll_resting logs one line for all of them
                return Resolution(row, Verdict.UNANSWERED, error=error)
            self.followed.pop(row.client_order_id, None)
            log.warning("resting order not found on the exchange: no longer followed", **fields)
            return Resolution(row, Verdict.ABSENT)
        self.reconcile_failed += 1
        if error is not None:
            log.error("reconcile failed: the exchange could not be asked", error=error, **fields)
            return Resolution(row, Verdict.UNANSWERED, error=error)
        absent = dataclasses.replace(
            row,
            kind=OrderRowKind.RESOLUTION,
            status=OrderStatus.ERROR,
            error_message=f"{NO_SUCH_ORDER_PREFIX}{cause}",
        )
        await sink.record_order(absent)
        log.warning("reconcile failed: the exchange has no such order", **fields)
        return Resolution(absent, Verdict.ABSENT)

    async def _found(
        self,
        row: OrderRow,
        cause: str | None,
        exchange_order: ExchangeOrder,
        tell_fills: bool,
        sink: OrderRowSink,
    ) -> Resolution:
        corrected = dataclasses.replace(
            row,
            kind=OrderRowKind.RESOLUTION,
            kalshi_order_id=exchange_order.order_id,
            status=exchange_order.status,
            error_message=row.error_message if cause is None else f"{RECONCILED_PREFIX}{cause}",
            fill_count=exchange_order.fill_count,
            remaining_count=exchange_order.remaining_count,
            average_fill_price=exchange_order.average_fill_price,
            average_fee_paid=exchange_order.average_fee_paid,
        )
        fields = {
            "client_order_id": row.client_order_id,
            "ticker": row.ticker,
            "status": str(exchange_order.status),
            "fill_count": exchange_order.fill_count,
            "kalshi_order_id": exchange_order.order_id,
        }
        if exchange_order.resting:
            self.followed[row.client_order_id] = corrected
        else:
            self.followed.pop(row.client_order_id, None)
        if cause is not None:
            self.reconciled += 1
            await sink.record_order(corrected)
            log.warning("order reconciled with the exchange", cause=cause, **fields)
        elif corrected != row:
            await sink.record_order(corrected)
            added = exchange_order.filled - _filled(row)
            if added > 0 and tell_fills and self.fills is not None:
                self.fills.record_fill(
                    row.ticker, added, self._clock(), row.correlation_group or ""
                )
            log.info(
                "resting order updated",
                exchange_status=exchange_order.exchange_status,
                **fields,
            )
        return Resolution(corrected, Verdict.FOUND, exchange_order)


def _take_fed(
    feed: OrderFeed, pending: dict[str, Unresolved], found: dict[str, ExchangeOrder]
) -> None:
    """Move the pending orders the feed already told of into ``found``: no lookup for them."""
    for client_order_id in list(pending):
        order = feed.known(client_order_id)
        if order is not None:
            found[client_order_id] = order
            del pending[client_order_id]


def _by_ticker(orders: Iterable[Unresolved]) -> dict[str, list[Unresolved]]:
    grouped: dict[str, list[Unresolved]] = {}
    for order in orders:
        grouped.setdefault(order.row.ticker, []).append(order)
    return grouped


def _sent_ms(row: OrderRow) -> int:
    return row.submitted_at_ms if row.submitted_at_ms is not None else row.requested_at_ms


def _min_ts_s(group: Sequence[Unresolved]) -> int:
    """The lookup's ``min_ts``: the earliest send in the group, less the margin (Unix s)."""
    return min(_sent_ms(order.row) for order in group) // 1000 - MIN_TS_MARGIN_S


__all__ = [
    "LOOKUP_TIMEOUT_S",
    "MIN_TS_MARGIN_S",
    "RECONCILE_DELAYS_S",
    "RECONCILE_TRIES",
    "CollectedRows",
    "FillRecorder",
    "OrderFeed",
    "OrderRowSink",
    "Reconciler",
    "Resolution",
    "StartupSummary",
    "Unresolved",
    "Verdict",
]
