"""Reconciliation: asking the exchange what became of an order whose outcome we do not know.

DISPATCH.md never retries a timed-out order (it may have been placed); the reference leaves its
row ``error``. Here such an order is looked up by its ``client_order_id``
(``executor.exchange.follow.lookup``) and its row corrected with the exchange's truth, never
re-sent: a late order is worse than none. Three callers:

- the dispatcher, right after an ambiguous failure (a timeout after the request may have been
  written, a connection lost after sending, a 5xx on the last attempt, a 409 "already exists", a
  2xx without an order): :meth:`Reconciler.resolve` looks the order up, up to
  ``RECONCILE_TRIES`` times over a few seconds (an order just sent may not be listed yet), and
  the fire continues with the truth (the ledger tells the risk gate of its fill);
- start-up, before the socket is published: :meth:`Reconciler.reconcile_at_startup` takes the
  rows earlier runs left open (``executor.recording.orders.open_orders``), so the risk gate's warm
  start reads a corrected table, and logs one summary line; a row sent in the last
  ``SETTLED_AFTER_MS`` gets every try, older ones one;
- the account poll: :meth:`Reconciler.poll_resting` asks again about every row that is not final
  (``executor.exchange.follow.follow_up``): orders on the book until they fill or are cancelled
  (each fill told to the risk gate), orders answered without a fill count, and orders whose outcome
  is still unknown, with a bounded backoff.

A lookup answers one of three things (:class:`Verdict`): **found** (the row takes the exchange's
status, ``kalshi_order_id`` and fill columns, ``error_message`` "reconciled with the exchange
after: {cause}"); **absent**, only when the exchange's own timestamp (``GET
/exchange/user_data_timestamp``, read before the listing) is later than the send plus
``ABSENCE_MARGIN_MS`` and the live listing still covers the send (the row becomes ``error``, "the
exchange has no such order after: {cause}"); otherwise **unknown** (not listed yet, or the
exchange could not be asked): the row is left open and followed, and every start-up asks again.
Counted in ``reconciled`` / ``reconcile_failed`` (absent) / ``lookups_unknown``.

With a feed (the exchange's stream, ``executor.exchange.stream.orders``), an order the stream has
already reported is taken as found without a lookup, and a wait between two tries ends as soon as
the stream reports one of them; :meth:`Reconciler.update` takes a followed order's news from the
stream.

What a lookup learns is an observation handed to the order ledger's keeper
(``executor.exchange.follow.ledger_keeper``), never a row built from a copy read before the
lookup's awaits: the keeper merges it forward only, writes the row and tells the risk gate of new
fill, once. Knows nothing of telemetry or the risk gate itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Final

import structlog
import trio

from executor.clock import wall_ms
from executor.exchange.follow.follow_up import FollowedOrders
from executor.exchange.follow.ledger_keeper import LedgerKeeper
from executor.exchange.follow.lookup import (
    ExchangeOrder,
)
from executor.exchange.follow.lookup_try import (
    LOOKUP_TIMEOUT_S,
    MIN_TS_MARGIN_S,
    ask_once,
    take_fed,
)
from executor.exchange.follow.observation import Observation, Source
from executor.exchange.follow.reconcile_terms import (
    Answers,
    CollectedRows,
    FillRecorder,
    OrderFeed,
    OrderRowSink,
    Resolution,
    StartupSummary,
    Unresolved,
    Verdict,
    sent_ms,
)
from executor.exchange.protocols import SignedReader
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    RECONCILED_PREFIX,
    is_open,
    startup_cause,
)
from executor.recording.rows import OrderRow, OrderStatus

log = structlog.get_logger()

RECONCILE_TRIES: Final = 4
"""Lookups of an order just sent before the fire gives up and leaves it to the account poll: the
exchange lists an order once it has processed it, which may be after our timeout gave up."""

RECONCILE_DELAYS_S: Final = (0.5, 1.0, 2.0)
"""Waits between those lookups (seconds): 3.5 s in all, "a few seconds"; a guess at how late an
exchange under load lists an order, not a measurement."""

SETTLED_AFTER_MS: Final = 30_000
"""At start-up, a row sent longer ago than this (ms) is looked up once: the exchange has long
listed it if it has it. Younger rows get the full tries."""


class Reconciler:
    """Looks orders up on the exchange and corrects their rows; follows every open order.

    Args:
        reader: signed GETs (the transport).
        sink: where corrected rows are queued (when no ``keeper`` is given).
        fills: told of fills learned while following orders (the risk gate; when no ``keeper``).
        keeper: the order ledger's keeper (None: one of its own over ``sink`` and ``fills``).
        feed: orders the exchange told of unasked (the stream), taken before asking, or None.
        delays_s: waits between tries (None: ``RECONCILE_DELAYS_S``, read when made).
        clock: wall-clock ms.
    """

    def __init__(
        self,
        reader: SignedReader,
        sink: OrderRowSink,
        *,
        fills: FillRecorder | None = None,
        keeper: LedgerKeeper | None = None,
        feed: OrderFeed | None = None,
        delays_s: Sequence[float] | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._reader = reader
        self.keeper = keeper or LedgerKeeper(sink, fills=fills, clock=clock)
        self.feed = feed
        self._delays_s = tuple(RECONCILE_DELAYS_S if delays_s is None else delays_s)
        self._clock = clock
        self.reconciled = 0
        self.reconcile_failed = 0
        self.lookups_unknown = 0
        """Lookups (one per order per call, whatever its tries) that ended unknown."""

    @property
    def followed(self) -> FollowedOrders:
        """Every open order, by id (its row; cause and backoff beside it): the ledger's."""
        return self.keeper.followed

    @property
    def orders_open(self) -> int:
        """Orders followed because the exchange has not said how they ended."""
        return len(self.followed)

    @property
    def resting(self) -> int:
        """:attr:`orders_open` under its name from before every open row was followed."""
        return len(self.followed)

    def follow(self, row: OrderRow, cause: str | None = None) -> None:
        """Follow ``row``'s order with the account poll if it is not final (:func:`is_open`): it
        may rest, it was answered without a fill count, its outcome is unknown. An ``error`` row
        is followed with its cause (given, or read from its marker), so a later find says so."""
        if cause is None and row.status is OrderStatus.ERROR and is_open(row):
            cause = startup_cause(row)
        self.keeper.track(row, follow=True, cause=cause)

    async def resolve(self, row: OrderRow, cause: str) -> Resolution:
        """Look one order up with every try (the dispatcher's call after an ambiguous failure).

        An unknown verdict leaves the row as it was and follows it (the account poll asks again).
        A fill found goes to the risk gate through the ledger (the fire does not tell it).

        Cancellation: a lookup cut short leaves the row as it was (``error``, outcome unknown),
        for the next start-up to resolve.
        """
        (resolution,) = await self.reconcile([Unresolved(row, cause)], tries=RECONCILE_TRIES)
        return resolution

    def open_orders(self) -> list[Unresolved]:
        """Every followed order, with its cause, to be looked up (the stream's reconnect)."""
        return [Unresolved(followed.row, followed.cause) for followed in self.followed.entries()]

    async def reconcile(
        self,
        orders: Sequence[Unresolved],
        *,
        tries: int,
        tell_fills: bool = True,
        sink: OrderRowSink | None = None,
    ) -> list[Resolution]:
        """Look ``orders`` up (grouped by ticker), each up to its tries, and write what is learned.

        Each try reads the exchange's data timestamp, then the listing; an order is done once
        found or known absent, and an error on one try is forgotten when a later one answers.
        ``tell_fills``: new fills go to the risk gate (not at start-up, where the warm start
        reads them from the corrected rows). ``sink`` replaces the keeper's for these rows.
        Returns one :class:`Resolution` per order, in the order given.
        """
        for order in orders:
            if order.row.client_order_id not in self.keeper.ledger:
                self.keeper.track(order.row)  # counted: its fill so far is the gate's already
        budget = {
            order.row.client_order_id: max(1, tries if order.tries is None else order.tries)
            for order in orders
        }
        pending = {order.row.client_order_id: order for order in orders}
        answers = Answers()
        attempt = 0
        while True:
            pending = {key: order for key, order in pending.items() if budget[key] > attempt}
            if not pending:
                break
            if attempt:
                delay_s = self._delays_s[min(attempt, len(self._delays_s)) - 1]
                if self.feed is None:
                    await trio.sleep(delay_s)
                else:  # the stream may tell of them before the next try is due
                    await self.feed.wait(pending, delay_s)
            if self.feed is not None:
                take_fed(self.feed, pending, answers.found)
            if pending:
                await ask_once(self._reader, pending, answers, self._clock())
            attempt += 1
        writes_to = sink or self.keeper.sink
        return [await self._conclude(order, answers, tell_fills, writes_to) for order in orders]

    async def reconcile_at_startup(
        self, rows: Sequence[OrderRow], sink: OrderRowSink | None = None
    ) -> StartupSummary:
        """Resolve earlier runs' open rows; follow those still open; log one line.

        A row sent within ``SETTLED_AFTER_MS`` gets ``RECONCILE_TRIES`` tries, an older one one.
        ``sink``: where the corrections go (start-up collects them to commit before the warm
        start), instead of the reconciler's own.
        """
        if not rows:
            return StartupSummary()
        now_ms = self._clock()
        orders = [
            Unresolved(
                row,
                startup_cause(row),
                RECONCILE_TRIES if now_ms - sent_ms(row) < SETTLED_AFTER_MS else 1,
            )
            for row in rows
        ]
        resolutions = await self.reconcile(orders, tries=1, tell_fills=False, sink=sink)
        counts = dict.fromkeys(("filled", "canceled", "resting", "absent", "unknown"), 0)
        for resolution in resolutions:
            if resolution.order is not None:
                kind = "resting" if resolution.order.resting else str(resolution.order.status)
            else:
                kind = resolution.verdict.value
            counts[kind] = counts.get(kind, 0) + 1
        summary = StartupSummary(**counts)
        log.info("start-up reconciliation", orders=len(rows), **dataclasses.asdict(summary))
        return summary

    async def poll_resting(self, *, unknown_only: bool = False) -> None:
        """One look at every open order due (``executor.exchange.follow.follow_up``); rows and the
        risk gate follow what changed. ``unknown_only``: only orders of unknown outcome (the
        exchange's stream reports the others' news).

        A failed look at orders on the book keeps following them (one warning per poll, however
        many); an order the exchange no longer has is dropped with a warning, its row left.
        """
        due = [followed for followed in self.followed.due() if followed.cause or not unknown_only]
        if not due:
            return
        orders = [Unresolved(followed.row, followed.cause) for followed in due]
        unanswered = [
            resolution
            for order, resolution in zip(orders, await self.reconcile(orders, tries=1), strict=True)
            if order.cause is None and resolution.error is not None
        ]
        if unanswered:
            log.warning(
                "resting orders lookup failed: still followed",
                orders=len(unanswered),
                error=unanswered[0].error,
            )

    async def update(self, exchange_order: ExchangeOrder, ts_ms: int | None = None) -> bool:
        """A followed order's news from elsewhere (the stream, said at ``ts_ms`` by the exchange):
        merged through the ledger as after a poll (an order of unknown outcome is reconciled with
        its cause). False when it changed nothing (or the order is not followed)."""
        key = exchange_order.client_order_id
        row = self.followed.get(key)
        if row is None:
            return False
        cause = self.followed.cause_of(key)
        resolution = await self._found(
            row, cause, exchange_order, True, self.keeper.sink, Source.STREAM_ORDER, ts_ms
        )
        return resolution.row != row  # no checkpoint between reading it and the merge

    async def _conclude(
        self, order: Unresolved, answers: Answers, tell_fills: bool, sink: OrderRowSink
    ) -> Resolution:
        """Write and log what was learned about ``order``; count it if it was unresolved."""
        row, cause = order.row, order.cause
        key = row.client_order_id
        exchange_order = answers.found.get(key)
        if exchange_order is not None:
            return await self._found(row, cause, exchange_order, tell_fills, sink)
        fields = {"client_order_id": key, "ticker": row.ticker, "cause": cause}
        if key in answers.absent:
            if cause is None:
                self.keeper.ledger.forget(key)
                log.warning("followed order gone from the exchange: no longer followed", **fields)
                return Resolution(row, Verdict.ABSENT)
            said = Observation(
                key,
                Source.LOOKUP,
                OrderStatus.ERROR,
                error_message=f"{NO_SUCH_ORDER_PREFIX}{cause}",
            )
            change = await self.keeper.observe(said, sink=sink)
            self.followed.drop(key)
            if change.row is not None:  # a row found absent before and asked again stays
                self.reconcile_failed += 1
                log.warning("reconcile failed: the exchange has no such order", **fields)
            return Resolution(self.keeper.row(key) or change.row or row, Verdict.ABSENT)
        error = answers.errors.get(key)
        self.lookups_unknown += 1
        row = self.keeper.unknown(row, cause) or row
        if cause is not None and error is not None:
            log.error("order lookup unanswered: outcome still unknown", error=error, **fields)
        elif cause is not None:
            log.warning("order not listed yet: outcome still unknown", **fields)
        return Resolution(row, Verdict.UNKNOWN, error=error)

    async def _found(
        self,
        row: OrderRow,
        cause: str | None,
        exchange_order: ExchangeOrder,
        tell_fills: bool,
        sink: OrderRowSink,
        source: Source = Source.LOOKUP,
        ts_ms: int | None = None,
    ) -> Resolution:
        """Hand the exchange's word on ``row``'s order to the ledger; the row as it now stands.

        ``row`` is only the order's identity here: what is written is the ledger's merge, so a
        lookup read before the stream's newer word cannot take the row back.
        """
        key = row.client_order_id
        said = Observation(
            key,
            source,
            exchange_order.status,
            fill_count=exchange_order.fill_count,
            remaining_count=exchange_order.remaining_count,
            kalshi_order_id=exchange_order.order_id,
            average_fill_price=exchange_order.average_fill_price,
            average_fee_paid=exchange_order.average_fee_paid,
            exchange_ts_ms=self._clock() if ts_ms is None else ts_ms,
            error_message=None if cause is None else f"{RECONCILED_PREFIX}{cause}",
            counted=not tell_fills,
        )
        change = await self.keeper.observe(said, follow=exchange_order.resting, sink=sink)
        current = change.row or self.keeper.row(key) or row
        if change.row is None:
            return Resolution(current, Verdict.FOUND, exchange_order)
        fields = {
            "client_order_id": key,
            "ticker": row.ticker,
            "status": str(current.status),
            "fill_count": current.fill_count,
            "kalshi_order_id": current.kalshi_order_id,
        }
        if cause is not None:
            self.reconciled += 1
            log.warning("order reconciled with the exchange", cause=cause, **fields)
        else:
            log.info(
                "resting order updated",
                exchange_status=exchange_order.exchange_status,
                source=str(source),
                **fields,
            )
        return Resolution(current, Verdict.FOUND, exchange_order)


__all__ = [
    "LOOKUP_TIMEOUT_S",
    "MIN_TS_MARGIN_S",
    "RECONCILE_DELAYS_S",
    "RECONCILE_TRIES",
    "SETTLED_AFTER_MS",
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
