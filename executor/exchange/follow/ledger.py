"""The order ledger: the one owner of every order's state, merged forward only (pure).

Six sources tell of an order: its own answer, the lookups (reconciliation, the account poll's
follow-up), the stream's ``fill`` and ``user_orders`` messages, the book's cancels, and start-up
(journal replay, adoption). Each hands the ledger an :class:`Observation`; :meth:`OrderLedger.
observe` merges it into the order's one row and says what changed (:class:`Change`): the row to
write, if any, and the contracts of fill the risk gate has not been told of yet.

The merge only moves forward:

- the status climbs ``pending`` -> ``error`` (outcome unknown, or not listed) -> ``submitted`` ->
  ``accepted`` (on the book, partly filled or not) -> final (``filled`` and off the book,
  ``canceled``, ``rejected``, or an ``error`` that was a definite refusal). An ``error`` of unknown
  outcome is resolved by any later truth; an observation below the row's rank changes nothing
  but what it adds to the fill;
- a fill count never falls: a total (a lookup, a ``user_order``, an answer, a cancel) raises it to
  the total; a single fill (a ``fill`` message) adds to it unless the exchange's time of it is no
  later than the last total applied (that total covers it) or its trade was applied already;
- a final order is never followed again, and nothing more is merged into it;
- each contract of fill is told to the risk gate once, whichever source saw it first; a source
  whose fills the gate learns another way (start-up, whose corrected rows the warm start reads)
  marks its observation ``counted``.

The ledger also holds :class:`~executor.exchange.follow.follow_up.FollowedOrders`, the open orders
the account poll and the stream follow, and keeps it in step with every merge. No I/O, no Trio:
``executor.exchange.follow.ledger_keeper`` applies observations one at a time and writes.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final

from executor.exchange.follow.follow_up import FollowedOrders
from executor.exchange.follow.observation import Change, Observation, observed_row
from executor.recording.orders.terms import (
    NO_SUCH_ORDER_PREFIX,
    Rank,
    decimal_of,
    rank_of,
    resolvable,
)
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus

FINISHED_KEPT: Final = 10_000
"""Final orders remembered (an id each) so a late observation of one changes nothing: far more
than the orders whose late news can still be on its way (the risk gate allows a few hundred a
day)."""

_AVERAGE_DECIMALS: Final = Decimal("0.0001")
"""Averages are written with 4 decimals, as the order response's fixed-point dollars are."""


@dataclass(slots=True)
class _Entry:
    row: OrderRow
    told: Decimal
    """Contracts of fill the risk gate knows of (told, or counted elsewhere)."""
    fence_ms: int = 0
    """The exchange's time of the last total applied: a single fill at or before it is in it."""
    trades: set[str] = field(default_factory=set)
    cancel_note: str | None = None
    """Why this executor asked for the order's cancel, for whichever source reports it ended."""


def _ended_by_cancel(row: OrderRow) -> bool:
    """Whether ``row`` says its order left the book by a cancel: ``canceled``, or ``filled`` in
    part with nothing left resting (a whole fill was no cancel's doing)."""
    if row.status is OrderStatus.CANCELED:
        return True
    if row.status is not OrderStatus.FILLED or row.remaining_count is None:
        return False
    left = decimal_of(row.remaining_count)
    return left == 0 and decimal_of(row.fill_count) < decimal_of(row.count)


def single_fill(row: OrderRow, observation: Observation) -> OrderRow:
    """``row`` after one fill: counts moved, averages re-weighted (YES side per contract)."""
    added = observation.fill_added or Decimal(0)
    before = decimal_of(row.fill_count)
    after = before + added
    remaining = decimal_of(row.remaining_count if row.remaining_count else row.count)
    price_total = decimal_of(row.average_fill_price) * before
    price = (price_total + (observation.fill_price or Decimal(0)) * added) / after
    fee = (decimal_of(row.average_fee_paid) * before + (observation.fill_fee or Decimal(0))) / after
    return dataclasses.replace(
        row,
        kalshi_order_id=row.kalshi_order_id or observation.kalshi_order_id,
        status=OrderStatus.FILLED,
        fill_count=f"{after:.2f}",
        remaining_count=f"{max(remaining - added, Decimal(0)):.2f}",
        average_fill_price=str(price.quantize(_AVERAGE_DECIMALS)),
        average_fee_paid=str(fee.quantize(_AVERAGE_DECIMALS)),
    )


def _total(row: OrderRow, observation: Observation) -> OrderRow:
    """``row`` merged with a total: the higher rank's status, the larger fill, the smaller
    remaining, the exchange's id kept once known."""
    base = row if observation.row is None else dataclasses.replace(observation.row, kind=row.kind)
    said = dataclasses.replace(
        base,
        status=observation.status,
        kalshi_order_id=observation.kalshi_order_id or row.kalshi_order_id,
        remaining_count=observation.remaining_count,
        error_message=observation.error_message or row.error_message,
    )
    # The word's own rank: an ``error`` without the exchange's id is of unknown outcome.
    row_rank = rank_of(row)
    said_rank = rank_of(dataclasses.replace(said, kalshi_order_id=observation.kalshi_order_id))
    stale = said_rank < row_rank
    merged = row if stale else said
    if said_rank == row_rank == Rank.UNKNOWN:
        merged = said  # "not listed" after "unknown", or the reverse: the later word stands
    held, told = decimal_of(row.fill_count), decimal_of(observation.fill_count)
    news = told > held or (row.fill_count is None and not stale)
    fill_from = observation if observation.fill_count is not None and news else None
    remaining = _smaller(row.remaining_count, observation.remaining_count)
    if said_rank == Rank.FINAL:
        remaining = observation.remaining_count
    if merged.status is OrderStatus.ERROR:
        remaining = row.remaining_count
    merged = dataclasses.replace(
        merged,
        kalshi_order_id=row.kalshi_order_id or observation.kalshi_order_id,
        remaining_count=remaining,
        fill_count=row.fill_count if fill_from is None else fill_from.fill_count,
        average_fill_price=(
            row.average_fill_price if fill_from is None else fill_from.average_fill_price
        ),
        average_fee_paid=row.average_fee_paid if fill_from is None else fill_from.average_fee_paid,
    )
    if stale and fill_from is None and merged.kalshi_order_id == row.kalshi_order_id:
        return row  # a stale word: nothing in it is news
    filled = decimal_of(merged.fill_count) > 0
    if filled and merged.status in (
        OrderStatus.SUBMITTED,
        OrderStatus.ACCEPTED,
        OrderStatus.CANCELED,
    ):
        merged = dataclasses.replace(merged, status=OrderStatus.FILLED)  # the lookup's rule
    return merged


def _smaller(held: str | None, said: str | None) -> str | None:
    if held is None:
        return said
    if said is None:
        return held
    return said if decimal_of(said) < decimal_of(held) else held


class OrderLedger:
    """Every known order's row, merged forward only (module docstring); and the followed ones."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._finished: OrderedDict[str, None] = OrderedDict()
        self.followed = FollowedOrders()
        """The open orders the account poll asks about and the stream updates."""

    def __contains__(self, client_order_id: object) -> bool:
        return client_order_id in self._entries

    def row(self, client_order_id: str) -> OrderRow | None:
        """The order's row as it now stands (None: not known, or final and forgotten)."""
        entry = self._entries.get(client_order_id)
        return None if entry is None else entry.row

    def told(self, client_order_id: str) -> Decimal:
        """Contracts of the order's fill the risk gate knows of."""
        entry = self._entries.get(client_order_id)
        return Decimal(0) if entry is None else entry.told

    def note_cancel(self, client_order_id: str, message: str) -> None:
        """This executor is about to cancel the order, for ``message``: whichever source then
        reports the order ended by a cancel (the cancel's own answer, or the stream's update that
        can overtake it), its row says so. An order already final, or unknown, keeps its row."""
        entry = self._entries.get(client_order_id)
        if entry is not None:
            entry.cancel_note = message

    def finished(self, client_order_id: str) -> bool:
        """Whether the order reached a final state here (nothing more is merged into it)."""
        return client_order_id in self._finished

    def track(
        self,
        row: OrderRow,
        *,
        counted: bool = True,
        follow: bool = False,
        cause: str | None = None,
        as_of_ms: int | None = None,
    ) -> Change:
        """Know ``row``'s order from now on (a pending row, a row read at start-up, an adopted
        order); an order known already takes ``row`` as an observation instead.

        ``counted``: the risk gate knows the row's fill (else it is told, in the change).
        ``follow``: follow the order if it is open, with ``cause`` (why its outcome is unknown).
        ``as_of_ms``: when the row's fill was true (single fills at or before it are in it).
        """
        key = row.client_order_id
        if key in self._entries or key in self._finished:
            observation = dataclasses.replace(
                observed_row(row), counted=counted, exchange_ts_ms=as_of_ms
            )
            return self.observe(observation, follow=follow, cause=cause)
        fill = decimal_of(row.fill_count)
        new_fill = Decimal(0) if counted else fill
        # The gate knows the whole fill now, told or counted.
        fence_ms = (as_of_ms or 0) if fill > 0 else 0  # nothing filled: nothing to cover
        self._entries[key] = _Entry(row, fill, fence_ms=fence_ms)
        if rank_of(row) == Rank.FINAL:
            self._finish(key)
            return Change(None, new_fill, final=True)
        if follow:
            self._follow(row, cause)
        return Change(None, new_fill)

    def observe(
        self, observation: Observation, *, follow: bool = False, cause: str | None = None
    ) -> Change:
        """Merge one observation (module docstring); the change to write and tell.

        ``follow``: an open order not followed yet is followed from now on (the answer, a lookup,
        an adoption); otherwise only an order already followed stays so.
        """
        key = observation.client_order_id
        if key in self._finished:
            return Change(final=True)
        entry = self._entries.get(key)
        if entry is None:
            return Change(known=False)
        row = entry.row
        if observation.fill_added is not None:
            merged = self._single(entry, observation)
        else:
            merged = _total(row, observation)
            if observation.exchange_ts_ms is not None:
                entry.fence_ms = max(entry.fence_ms, observation.exchange_ts_ms)
        note = entry.cancel_note
        if note is not None and merged.error_message is None and _ended_by_cancel(merged):
            merged = dataclasses.replace(merged, error_message=note)
        fill = decimal_of(merged.fill_count)
        new_fill = Decimal(0)
        if fill > entry.told:
            if not observation.counted:
                new_fill = fill - entry.told
            entry.told = fill
        changed = merged != row
        if changed:
            merged = dataclasses.replace(merged, kind=OrderRowKind.RESOLUTION)
            entry.row = merged
        final = rank_of(merged) == Rank.FINAL
        if final:
            self._finish(key)
        elif key in self.followed or follow:
            self._follow(merged, cause if merged.status is OrderStatus.ERROR else None)
        return Change(merged if changed else None, new_fill, final)

    def _single(self, entry: _Entry, observation: Observation) -> OrderRow:
        """A single fill applied unless a total or an earlier copy of it already holds it."""
        covered = observation.exchange_ts_ms is not None and observation.exchange_ts_ms <= (
            entry.fence_ms
        )
        trade = observation.trade_id
        if (
            covered
            or (trade is not None and trade in entry.trades)
            or entry.row.status
            in (
                OrderStatus.PENDING,
                OrderStatus.ERROR,
            )
        ):
            return entry.row  # counted already, or an order whose total must settle it whole
        if trade is not None:
            entry.trades.add(trade)
        return single_fill(entry.row, observation)

    def _follow(self, row: OrderRow, cause: str | None) -> None:
        """Keep ``followed`` in step with ``row``: orders on the book, answered without a fill
        count, or of unknown outcome are followed (an unknown one keeps its cause and backoff);
        any other leaves it."""
        followed, key, rank = self.followed, row.client_order_id, rank_of(row)
        absent = (row.error_message or "").startswith(NO_SUCH_ORDER_PREFIX)
        if rank in (Rank.SUBMITTED, Rank.ON_BOOK):
            followed.found(row, None)
        elif rank == Rank.UNKNOWN and not absent:
            if key in followed:
                followed.replace_row(row, cause)
            else:
                followed.found(row, cause)
        else:
            followed.drop(key)

    def _finish(self, client_order_id: str) -> None:
        self._entries.pop(client_order_id, None)
        self.followed.drop(client_order_id)
        self._finished[client_order_id] = None
        while len(self._finished) > FINISHED_KEPT:
            self._finished.popitem(last=False)

    def forget(self, client_order_id: str) -> None:
        """Stop knowing an order that is not final (the exchange no longer lists it)."""
        self._entries.pop(client_order_id, None)
        self.followed.drop(client_order_id)


__all__ = [
    "FINISHED_KEPT",
    "OrderLedger",
    "Rank",
    "decimal_of",
    "rank_of",
    "resolvable",
    "single_fill",
]
