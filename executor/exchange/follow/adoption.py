"""Adoption: a row for every order the exchange has from this installation and the table lacks.

The intent journal makes a row for every order sent before a process kill; adoption covers what
even the journal can lose (a power cut, a journal deleted or unwritable) and whatever else left an
order of ours on the exchange without a row. A pass lists the account's orders
(``GET /portfolio/orders`` with ``min_ts`` and the cursor, no ticker: ``order_lookup.list_orders``)
since the earliest run whose orders were not yet checked began (``executor.recording.
installation``'s ``adopt_since_ms``, recorded before that run sent anything, so at or before its
first heartbeat), less ``MIN_TS_MARGIN_S`` for the clocks, at most
:data:`ADOPTION_LOOKBACK_MAX_MS` back; and for every order whose ``client_order_id`` carries
this installation's prefix and has no row, writes one: the exchange's status, fill and
``order_id``, ``error_message`` :data:`ADOPTED_MESSAGE`, counted ``adopted``. Orders of other
clients (any other id) are left alone and counted (``foreign_orders``, the last pass's figure).

When: at start-up, before reconciliation and the risk gate's warm start (which then read the
adopted rows: an adopted resting order is followed like any other), and then by
:meth:`Adopter.serve`: again every ``ADOPTION_RECHECK_S`` until a pass has run
``ADOPTION_SETTLE_S`` after this run began (an exchange may list an order seconds after it
arrived; the pass that late has seen everything earlier runs sent, so ``adopt_since_ms`` moves to
this run's start), and after every audit outage ends (:meth:`Adopter.request_pass`, attached to
the audit trail's transitions).

An order this run has in flight is never adopted: the listing is read first, then the orders the
intent journal still holds (sent, no row committed yet), then the table; an order listed was sent
before the listing, so its row is in one of the two. An adopted row is written "unless the order
has a row by then" (``OrderRowKind.ADOPTED``), so a race can only skip it.

What an adopted row cannot know: the wake's correlation id (a fresh one), the correlation group
(NULL), the time in force (not in the listing: the configured one).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final, Protocol

import structlog
import trio

from executor.clock import wall_ms
from executor.exchange.follow.ledger_keeper import LedgerKeeper
from executor.exchange.follow.lookup import (
    ExchangeOrder,
    list_orders,
    parse_exchange_order,
)
from executor.exchange.follow.reconcile import MIN_TS_MARGIN_S, CollectedRows, OrderRowSink
from executor.exchange.messages import ExchangeError
from executor.exchange.protocols import SignedReader
from executor.recording.audit_trail import AuditTransition
from executor.recording.database import read_orders_fired
from executor.recording.orders.installation import ClientOrderIds, save_adopt_since
from executor.recording.orders.open_orders import LIVE_WINDOW_MS, write_corrections
from executor.recording.orders.terms import ADOPTED_MESSAGE, GOOD_TILL_CANCELED
from executor.recording.rows import OrderRow, OrderRowKind, row_fields

log = structlog.get_logger()

ADOPTION_SETTLE_S: Final = 60.0
"""A pass this long after the run began has seen every order earlier runs sent (seconds): the
issue measured an exchange listing an order 7.5 s after it arrived; eight times that is a guess,
not a measurement, until ``GET /exchange/user_data_timestamp`` says how current the listing is."""

ADOPTION_LOOKBACK_MAX_MS: Final = LIVE_WINDOW_MS
"""How far back a pass lists at most (ms): as far as the live ``GET /portfolio/orders`` is taken
to hold every order (``LIVE_WINDOW_MS``, a month; older ones would need ``GET
/historical/orders``, not read). Not a day: an order left without a row is near the moment its
run died, and the restart may come days after that. A last run that began longer ago than this
has its older orders left unlooked-for (a warning says so)."""

ADOPTION_RECHECK_S: Final = 30.0
"""Seconds between passes until then: the account poll's interval."""

ADOPTION_MAX_PAGES: Final = 1000
"""Pages one pass follows (at 200 orders a page: 200,000 of the account's orders, other clients'
included, since the window's start); a longer listing fails the pass (logged; the next one tries
again). A guess, generous for a risk gate's 50 orders a day."""

ADOPTION_TIMEOUT_S: Final = 60.0
"""Budget of one pass's listing (seconds): generous, it runs before serving or in the
background; a guess."""


class AdoptedOrderRecorder(Protocol):
    """What an order adopted while running tells the risk gate (``RiskGate`` fits)."""

    def record_attempt(
        self,
        ticker: str,
        direction: str,
        count: int,
        price: float,
        now_ms: int,
        correlation_group: str,
    ) -> None: ...

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None: ...


_ID_CHUNK: Final = 500
"""Ids per ``IN (...)`` query: under SQLite's historical 999-variable limit."""


@dataclass(frozen=True, slots=True)
class AdoptionPass:
    """One pass in numbers, and the rows it wrote."""

    listed: int = 0
    ours: int = 0
    foreign: int = 0
    rows: tuple[OrderRow, ...] = ()

    @property
    def adopted(self) -> int:
        """Orders adopted in this pass."""
        return len(self.rows)


def _created_ms(entry: dict[str, Any]) -> int | None:
    text = entry.get("created_time")
    if not isinstance(text, str):
        return None
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _price(entry: dict[str, Any]) -> str:
    try:
        return f"{Decimal(str(entry.get('yes_price_dollars'))):.4f}"
    except InvalidOperation:
        raise ExchangeError(f"orders response: bad yes_price_dollars {entry!r:.200}") from None


def adopted_row(
    entry: dict[str, Any],
    order: ExchangeOrder,
    *,
    time_in_force: str,
    self_trade_prevention_type: str,
    now_ms: int,
) -> OrderRow:
    """The row of an order found on the exchange with no local record.

    Raises:
        ExchangeError: the listing lacks what the row's CHECKs need (count, price, side).
    """
    side = entry.get("outcome_side")
    if side not in ("yes", "no"):
        side = {"bid": "yes", "ask": "no"}.get(str(entry.get("book_side")))
    count = entry.get("initial_count_fp")
    if side is None or not isinstance(count, str):
        raise ExchangeError(f"orders response: order without side or count {entry!r:.200}")
    stp = entry.get("self_trade_prevention_type")
    requested_at_ms = _created_ms(entry) or now_ms
    return OrderRow(
        kind=OrderRowKind.ADOPTED,
        correlation_id=uuid.uuid4().hex,
        client_order_id=order.client_order_id,
        kalshi_order_id=order.order_id,
        ticker=str(entry.get("ticker")),
        correlation_group=None,
        outcome_side=side,
        count=count,
        price_dollars=_price(entry),
        time_in_force=time_in_force,
        self_trade_prevention_type=stp if isinstance(stp, str) else self_trade_prevention_type,
        post_only=int(time_in_force == GOOD_TILL_CANCELED),
        status=order.status,
        error_message=ADOPTED_MESSAGE,
        fill_count=order.fill_count,
        remaining_count=order.remaining_count,
        average_fill_price=order.average_fill_price,
        average_fee_paid=order.average_fee_paid,
        requested_at_ms=requested_at_ms,
        submitted_at_ms=requested_at_ms,
        acknowledged_at_ms=None,
    )


def rows_present(db_path: Path, client_order_ids: list[str]) -> set[str]:
    """The ids among ``client_order_ids`` that have an ``orders_fired`` row (blocking)."""
    present: set[str] = set()
    for start in range(0, len(client_order_ids), _ID_CHUNK):
        chunk = client_order_ids[start : start + _ID_CHUNK]
        marks = ", ".join("?" for _ in chunk)
        sql = f"SELECT client_order_id FROM orders_fired WHERE client_order_id IN ({marks})"
        present.update(str(row[0]) for row in read_orders_fired(db_path, sql, tuple(chunk)))
    return present


class Adopter:
    """Runs adoption passes for one run of the executor.

    Args:
        reader: signed GETs (the transport).
        ids: this installation's ids (which orders are ours).
        db_path: the audit database (read in a worker thread; ``adopt_since_ms`` saved there).
        time_in_force / self_trade_prevention_type: the configured order flags.
        run_started_ms: when this run began.
        adopt_since_ms: where the first pass starts looking (None: as far back as
            ``ADOPTION_LOOKBACK_MAX_MS``).
        in_flight: the orders sent and not yet committed (the intent journal's outstanding).
        clock: wall-clock ms.
    """

    def __init__(
        self,
        reader: SignedReader,
        ids: ClientOrderIds,
        db_path: Path,
        *,
        time_in_force: str,
        self_trade_prevention_type: str,
        run_started_ms: int,
        adopt_since_ms: int | None,
        in_flight: Callable[[], Iterable[str]] = frozenset,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._reader = reader
        self.ids = ids
        self._db_path = db_path
        self._time_in_force = time_in_force
        self._stp = self_trade_prevention_type
        self.run_started_ms = run_started_ms
        self._since_ms = adopt_since_ms
        self._in_flight = in_flight
        self._clock = clock
        self.settled = False
        self.adopted = 0
        self.foreign_orders = 0
        self.passes_failed = 0
        self._due = trio.Event()
        self._window_cut = False

    def request_pass(self) -> None:
        """Ask for a pass as soon as :meth:`serve` can run one (e.g. an audit outage ended)."""
        self._due.set()

    def hear_audit(self, transition: AuditTransition) -> None:
        """An audit-trail transition (``AuditTrailState.on_change``): the end of an outage asks
        for a pass (orders placed while rows could not be written get theirs). Never
        checkpoints."""
        if transition.available:
            self.request_pass()

    def _min_ts_s(self, now_ms: int) -> int:
        """The listing's ``min_ts`` (seconds): the window's start less the clocks' margin, at
        most ``ADOPTION_LOOKBACK_MAX_MS`` back (a cut window is one warning per run)."""
        oldest_ms = now_ms - ADOPTION_LOOKBACK_MAX_MS
        start_ms = oldest_ms if self._since_ms is None else self._since_ms - MIN_TS_MARGIN_S * 1000
        if start_ms < oldest_ms and not self._window_cut:
            self._window_cut = True
            log.warning(
                "adoption window cut to the exchange's live listing: older orders not looked for",
                since_ms=self._since_ms,
                from_ms=oldest_ms,
            )
        return max(start_ms, oldest_ms) // 1000

    async def adopt(self, sink: OrderRowSink) -> AdoptionPass | None:
        """One pass: list, compare, write the adopted rows to ``sink``; None when the exchange
        could not be listed (logged, counted in ``passes_failed``; the next pass tries again)."""
        started_ms = self._clock()
        try:
            with trio.fail_after(ADOPTION_TIMEOUT_S):
                listed = await list_orders(
                    self._reader, self._min_ts_s(started_ms), max_pages=ADOPTION_MAX_PAGES
                )
            in_flight = set(self._in_flight())  # after the listing: see the module docstring
            ours: dict[str, tuple[dict[str, Any], ExchangeOrder]] = {}
            foreign = 0
            for entry in listed:
                if not self.ids.is_ours(entry.get("client_order_id")):
                    foreign += 1
                elif entry["client_order_id"] not in in_flight:
                    ours[entry["client_order_id"]] = (entry, parse_exchange_order(entry))
            present = await trio.to_thread.run_sync(rows_present, self._db_path, list(ours))
            rows = tuple(
                adopted_row(
                    entry,
                    order,
                    time_in_force=self._time_in_force,
                    self_trade_prevention_type=self._stp,
                    now_ms=started_ms,
                )
                for client_order_id, (entry, order) in ours.items()
                if client_order_id not in present
            )
        except (ExchangeError, trio.TooSlowError) as error:
            self.passes_failed += 1
            log.warning("adoption pass failed: tried again later", error=str(error) or "timeout")
            return None
        for row in rows:
            await sink.record_order(row)
            log.warning(
                "order adopted from the exchange: no local record",
                client_order_id=row.client_order_id,
                ticker=row.ticker,
                status=str(row.status),
                fill_count=row.fill_count,
                kalshi_order_id=row.kalshi_order_id,
            )
        self.adopted += len(rows)
        self.foreign_orders = foreign
        summary = AdoptionPass(len(listed), len(ours), foreign, rows)
        log.info(
            "adoption pass",
            listed=summary.listed,
            ours_without_flight=summary.ours,
            adopted=summary.adopted,
            foreign_orders=foreign,
        )
        await self._settle_if_due(started_ms)
        return summary

    async def _settle_if_due(self, started_ms: int) -> None:
        if self.settled or started_ms - self.run_started_ms < ADOPTION_SETTLE_S * 1000:
            return
        self.settled = True
        self._since_ms = self.run_started_ms
        try:
            await trio.to_thread.run_sync(save_adopt_since, self._db_path, self.run_started_ms)
        except Exception as error:  # the next start-up looks further back: harmless
            log.warning("adoption window not saved", error=str(error))

    async def serve(
        self,
        sink: OrderRowSink,
        on_adopted: Callable[[OrderRow], None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the later passes until cancelled: every ``ADOPTION_RECHECK_S`` until settled,
        and whenever :meth:`request_pass` asks; ``on_adopted`` hears of each row (the risk gate,
        the follower of resting orders)."""
        task_status.started()
        while True:
            with trio.move_on_after(float("inf") if self.settled else ADOPTION_RECHECK_S):
                await self._due.wait()
            self._due = trio.Event()
            try:
                summary = await self.adopt(sink)
            except Exception as error:  # a bug here must not stop the executor
                log.exception("adoption pass failed", error=str(error))
                continue
            for row in () if summary is None else summary.rows:
                on_adopted(row)


async def adopt_at_startup(adopter: Adopter, db_path: Path) -> None:
    """One adoption pass, its rows committed before reconciliation and the warm start read the
    table (blocking writes in a worker thread). A listing that fails is logged by the adopter; the
    later passes try again.
    """
    collected = CollectedRows()
    await adopter.adopt(collected)
    if not collected.rows:
        return
    outcome = await trio.to_thread.run_sync(write_corrections, db_path, collected.rows)
    for row, error in outcome.order_failures:
        log.error("adopted row not written", row=row_fields(row), error=error)


def take_adopted(keeper: LedgerKeeper, risk: AdoptedOrderRecorder | None, row: OrderRow) -> None:
    """An order adopted while running: an attempt for the risk gate as of now (its windows count
    it from now: later than it was, never missed), and the row to the order ledger, which tells
    the gate of its fill once (an order the ledger knows already is not counted again) and follows
    it while it rests."""
    if risk is not None:
        count, price = float(row.count), float(row.price_dollars)
        risk.record_attempt(row.ticker, row.outcome_side, int(count), price, wall_ms(), "")
    keeper.track(row, counted=False, follow=True)


__all__ = [
    "ADOPTED_MESSAGE",
    "ADOPTION_LOOKBACK_MAX_MS",
    "ADOPTION_RECHECK_S",
    "ADOPTION_SETTLE_S",
    "Adopter",
    "AdoptionPass",
    "adopt_at_startup",
    "adopted_row",
    "rows_present",
    "take_adopted",
]
