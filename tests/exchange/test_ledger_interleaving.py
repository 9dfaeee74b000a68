"""The order ledger under every interleaving of its sources (``executor.exchange.follow.ledger``).

A Hypothesis state machine keeps a model of one good_till_canceled order on the exchange (placed,
filled in parts by trades, maybe cancelled) and feeds the ledger what each source would say of it:
the order's answer (or an unknown outcome), lookups and ``user_order`` totals of any earlier
moment (stale), single ``fill`` messages in any order and duplicated, and the cancel's answer.
After every step the row has not moved backward and the risk gate was told no more than the
exchange filled; once the last word is delivered, the row is the exchange's and the gate's sum
is its fill.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from executor.exchange.follow.ledger import OrderLedger, Rank, decimal_of, rank_of
from executor.exchange.follow.observation import Observation, Source, observed_row
from executor.recording.orders.terms import OUTCOME_UNKNOWN_PREFIX
from executor.recording.rows import OrderRow, OrderRowKind, OrderStatus
from tests.support.rows import order_row

COUNT = 10
KEY = "k" * 32


@dataclass(frozen=True, slots=True)
class Moment:
    """The exchange's order after some of its events: what a total of that moment says."""

    ts_ms: int
    filled: int
    canceled: bool

    @property
    def final(self) -> bool:
        return self.canceled or self.filled == COUNT

    def observation(self, source: Source) -> Observation:
        status = OrderStatus.FILLED if self.filled else OrderStatus.ACCEPTED
        if self.canceled and not self.filled:
            status = OrderStatus.CANCELED
        return Observation(
            client_order_id=KEY,
            source=source,
            status=status,
            fill_count=f"{self.filled}.00",
            remaining_count="0.00" if self.final else f"{COUNT - self.filled}.00",
            kalshi_order_id="exchange-id",
            average_fill_price="0.4200" if self.filled else None,
            average_fee_paid="0.0100" if self.filled else None,
            exchange_ts_ms=self.ts_ms,
        )


@dataclass(frozen=True, slots=True)
class Trade:
    trade_id: str
    contracts: int
    ts_ms: int


def pending_row() -> OrderRow:
    return order_row(
        client_order_id=KEY,
        count=f"{COUNT}.00",
        time_in_force="good_till_canceled",
        post_only=1,
    )


class LedgerAgainstTheExchange(RuleBasedStateMachine):
    """One order, its exchange-side history, and the ledger fed from it in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.ledger = OrderLedger()
        self.ledger.track(pending_row(), counted=False)
        self.gate = Decimal(0)
        self.now_ms = 1_000
        self.moments = [Moment(self.now_ms, 0, False)]
        self.trades: list[Trade] = []
        self.last_row: OrderRow = pending_row()
        self.answered = False

    # ------------------------------------------------------------ the exchange moves

    @precondition(lambda self: not self.moments[-1].final)
    @rule(contracts=st.integers(min_value=1, max_value=4))
    def trade(self, contracts: int) -> None:
        """Someone takes some of the resting order."""
        last = self.moments[-1]
        contracts = min(contracts, COUNT - last.filled)
        self.now_ms += 10
        self.trades.append(Trade(f"t{len(self.trades)}", contracts, self.now_ms))
        self.moments.append(Moment(self.now_ms, last.filled + contracts, False))

    @precondition(lambda self: not self.moments[-1].final)
    @rule()
    def cancel(self) -> None:
        """The order is cancelled (by us or the exchange)."""
        self.now_ms += 10
        self.moments.append(Moment(self.now_ms, self.moments[-1].filled, True))

    # ------------------------------------------------------------ the sources speak

    def apply(self, observation: Observation) -> None:
        change = self.ledger.observe(observation, follow=True)
        self.gate += change.new_fill
        if change.row is not None:
            self.last_row = change.row

    @rule(late=st.booleans(), unknown=st.booleans())
    def answer(self, late: bool, unknown: bool) -> None:
        """The order's own answer: what the exchange said on placement, or an unknown outcome."""
        if unknown:
            row = dataclasses.replace(
                pending_row(),
                kind=OrderRowKind.RESOLUTION,
                status=OrderStatus.ERROR,
                error_message=f"{OUTCOME_UNKNOWN_PREFIX}read timed out",
            )
            self.apply(observed_row(row))
        else:
            self.apply(self.moments[0 if not late else -1].observation(Source.ANSWER))
        self.answered = True

    @rule(data=st.data(), source=st.sampled_from([Source.LOOKUP, Source.STREAM_ORDER]))
    def total(self, data: st.DataObject, source: Source) -> None:
        """A lookup or a ``user_order`` message of any moment so far (stale or current)."""
        index = data.draw(st.integers(min_value=0, max_value=len(self.moments) - 1))
        self.apply(self.moments[index].observation(source))

    @rule(data=st.data())
    def adopted(self, data: st.DataObject) -> None:
        """An adoption pass hands in the order's row of any moment so far, as a new order would
        be: known already, it is one more observation (its fill never counted twice)."""
        index = data.draw(st.integers(min_value=0, max_value=len(self.moments) - 1))
        said = self.moments[index].observation(Source.ADOPTION)
        row = dataclasses.replace(
            pending_row(),
            kind=OrderRowKind.ADOPTED,
            status=said.status,
            kalshi_order_id=said.kalshi_order_id,
            fill_count=said.fill_count,
            remaining_count=said.remaining_count,
        )
        change = self.ledger.track(row, counted=False, follow=True, as_of_ms=said.exchange_ts_ms)
        self.gate += change.new_fill
        if change.row is not None:
            self.last_row = change.row

    @precondition(lambda self: bool(self.trades))
    @rule(data=st.data())
    def fill(self, data: st.DataObject) -> None:
        """A ``fill`` message of any trade so far, in any order, maybe again."""
        trade = data.draw(st.sampled_from(self.trades))
        self.apply(
            Observation(
                client_order_id=KEY,
                source=Source.STREAM_FILL,
                status=OrderStatus.FILLED,
                kalshi_order_id="exchange-id",
                exchange_ts_ms=trade.ts_ms,
                trade_id=trade.trade_id,
                fill_added=Decimal(trade.contracts),
                fill_price=Decimal("0.42"),
                fill_fee=Decimal("0.01") * trade.contracts,
            )
        )

    # ------------------------------------------------------------ what must hold

    @invariant()
    def never_backward_never_over(self) -> None:
        """The row's rank and fill only rise; the gate never hears of more than was filled."""
        truth = self.moments[-1].filled
        assert self.gate <= truth, (self.gate, truth)
        assert self.gate == decimal_of(self.last_row.fill_count)
        assert decimal_of(self.last_row.fill_count) <= truth

    def teardown(self) -> None:
        """The last word delivered: the row is the exchange's, the gate's sum its fill."""
        before = rank_of(self.last_row)
        last = self.moments[-1]
        self.apply(last.observation(Source.LOOKUP))
        assert rank_of(self.last_row) >= before
        assert decimal_of(self.last_row.fill_count) == last.filled
        assert self.gate == last.filled
        expected = last.observation(Source.LOOKUP).status
        assert self.last_row.status is expected
        if last.final:
            assert rank_of(self.last_row) == Rank.FINAL
            assert self.ledger.finished(KEY) and KEY not in self.ledger.followed
        else:
            assert KEY in self.ledger.followed


class _Ranked(LedgerAgainstTheExchange):
    """The same machine, checking after each step that the rank did not fall."""

    def apply(self, observation: Observation) -> None:
        before = rank_of(self.last_row)
        fill_before = decimal_of(self.last_row.fill_count)
        super().apply(observation)
        assert rank_of(self.last_row) >= before
        assert decimal_of(self.last_row.fill_count) >= fill_before


_Ranked.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLedgerInterleavings = _Ranked.TestCase
TestLedgerInterleavings.__doc__ = (
    "No interleaving of sources moves a row backward or tells the gate of a fill twice."
)
