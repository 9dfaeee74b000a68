"""The order ledger's owner on the Trio side: observations applied one at a time, rows written.

Every source of an order's truth (the answer, lookups, the stream, cancels, adoption) hands its
word to :class:`LedgerKeeper`. The merge (``executor.exchange.follow.ledger``) runs at once, with
no checkpoint between reading the order's state and storing the merged one, so two sources can
never both start from the same copy; only then is the row written and the risk gate told. Writes
queue behind a lock (trio's is fair, first come first served), so rows reach telemetry in the
order the merges made them and the last row written is the ledger's latest.

Nothing else writes an order row after its answer or tells the risk gate of a fill: rows go to an
:class:`~executor.exchange.follow.reconcile_terms.OrderRowSink` (telemetry), new contracts of
fill to a :class:`~executor.exchange.follow.reconcile_terms.FillRecorder` (the risk gate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal
from typing import Final

import trio

from executor.clock import wall_ms
from executor.exchange.follow.follow_up import FollowedOrders
from executor.exchange.follow.ledger import OrderLedger
from executor.exchange.follow.observation import Change, Observation, Source, observed_row
from executor.exchange.follow.reconcile_terms import FillRecorder, OrderRowSink
from executor.recording.rows import OrderRow

WRITE_TIMEOUT_S: Final = 2.0
"""A row's budget to reach telemetry (seconds; telemetry's own for order rows); the lock's wait
behind earlier rows gets as much again."""


class LedgerKeeper:
    """Applies observations to the ledger one at a time; writes rows, tells the risk gate.

    Args:
        sink: where rows go (telemetry).
        fills: who hears of new contracts of fill (the risk gate), or None.
        clock: wall-clock ms (the fill's time for the risk gate).
    """

    def __init__(
        self,
        sink: OrderRowSink,
        *,
        fills: FillRecorder | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.sink = sink
        self.fills = fills
        self._clock = clock
        self.ledger = OrderLedger()
        self._writing = trio.Lock()
        self.fills_told = Decimal(0)
        """Contracts of fill told to the risk gate through the ledger, this run."""

    @property
    def followed(self) -> FollowedOrders:
        """The open orders being followed (the ledger's)."""
        return self.ledger.followed

    def track(
        self,
        row: OrderRow,
        *,
        counted: bool = True,
        follow: bool = False,
        cause: str | None = None,
    ) -> OrderRow | None:
        """Know ``row``'s order (a pending row, an open row at start-up, an adopted order); its
        fill goes to the risk gate unless ``counted``. Returns the row as it now stands.

        A fill it holds is true as of now: a single fill dated before it is in it.

        Cancellation: never checkpoints (the dispatcher calls it before its first await).
        """
        change = self.ledger.track(
            row, counted=counted, follow=follow, cause=cause, as_of_ms=self._clock()
        )
        self._tell(change, row)
        return self.ledger.row(row.client_order_id) or change.row or row

    async def observe(
        self,
        observation: Observation,
        *,
        follow: bool = False,
        cause: str | None = None,
        sink: OrderRowSink | None = None,
        timeout_s: float | None = None,
    ) -> Change:
        """Merge one observation, then write the row if it changed and tell the risk gate of
        new fill (before the write's first checkpoint). ``sink`` replaces the keeper's for this
        row (start-up collects its corrections); ``timeout_s`` is the write's budget.

        Cancellation: the merge and the gate are done before the first checkpoint; the write is
        the sink's (telemetry's is shielded and bounded).
        """
        if observation.fill_added is None and observation.exchange_ts_ms is None:
            # A total with no time of its own is true as of now at the latest: a single fill
            # dated before it is in it (counting it again would be worse than waiting for the
            # next total).
            observation = dataclasses.replace(observation, exchange_ts_ms=self._clock())
        change = self.ledger.observe(observation, follow=follow, cause=cause)
        if change.row is not None:
            self._tell(change, change.row)
            await self._write(change.row, sink, timeout_s)
        return change

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        """A whole row a source built, as its observation (an :class:`OrderRowSink`)."""
        await self.observe(observed_row(row), timeout_s=timeout_s)

    def source(self, source: Source) -> OrderRowSink:
        """An :class:`OrderRowSink` whose rows are ``source``'s observations (the book's
        cancels hand their rows this way)."""
        return _SourceSink(self, source)

    def unknown(self, row: OrderRow, cause: str | None) -> OrderRow | None:
        """A lookup of ``row``'s order ended unknown: follow it as it now stands and back off;
        None (nothing followed) when the order ended meanwhile."""
        key = row.client_order_id
        if self.ledger.finished(key):
            return None
        current = self.ledger.row(key)
        if current is None:
            self.ledger.track(row)
            current = row
        self.followed.unknown(current, cause or self.followed.cause_of(key))
        return current

    def row(self, client_order_id: str) -> OrderRow | None:
        """The order's row as it now stands (None: not known, or final)."""
        return self.ledger.row(client_order_id)

    def _tell(self, change: Change, row: OrderRow) -> None:
        if change.new_fill <= 0 or self.fills is None:
            return
        self.fills_told += change.new_fill
        self.fills.record_fill(
            row.ticker, float(change.new_fill), self._clock(), row.correlation_group or ""
        )

    async def _write(
        self, row: OrderRow, sink: OrderRowSink | None, timeout_s: float | None
    ) -> None:
        # Shielded (bounded): a merge already made must reach its row even under shutdown.
        budget_s = WRITE_TIMEOUT_S if timeout_s is None else timeout_s
        with trio.move_on_after(budget_s * 2, shield=True):
            async with self._writing:
                if timeout_s is None:
                    await (sink or self.sink).record_order(row)
                else:
                    await (sink or self.sink).record_order(row, timeout_s=timeout_s)


@dataclasses.dataclass(frozen=True, slots=True)
class _SourceSink:
    keeper: LedgerKeeper
    source_name: Source

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        observation = observed_row(row, self.source_name)
        await self.keeper.observe(observation, timeout_s=timeout_s)

    def note_cancel(self, client_order_id: str, message: str) -> None:
        """A :class:`~executor.exchange.follow.reconcile_terms.CancelNotes`: see
        :meth:`~executor.exchange.follow.ledger.OrderLedger.note_cancel`."""
        self.keeper.ledger.note_cancel(client_order_id, message)


__all__ = ["LedgerKeeper"]
