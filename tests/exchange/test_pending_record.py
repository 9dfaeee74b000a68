"""What the order path builds before its first byte: the intent record's fields made without the
row (they must be exactly the row's), and ids drawn ahead (each used once, each fresh)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from executor.decide.order_request import FireRequest, OrderTemplate
from executor.exchange.orders.rows import OrderPolicy, PreparedOrder, order_row, pending_record
from executor.recording.orders.installation import IDS_DRAWN_AHEAD, ClientOrderIds
from executor.recording.orders.intent_journal import decode_record, frame_record, row_record_fields
from executor.recording.rows import OrderRowKind

TEXT = st.text(min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    ticker=st.text(min_size=1, max_size=40),
    outcome=st.sampled_from(["yes", "no"]),
    count=st.integers(min_value=1, max_value=10_000),
    price=st.sampled_from(["0.0100", "0.5600", "0.9900"]),
    correlation_id=st.text(min_size=1, max_size=40),
    correlation_group=TEXT,
    time_in_force=st.sampled_from(["fill_or_kill", "good_till_canceled", "immediate_or_cancel"]),
    self_trade=st.sampled_from(["taker_at_cross", "maker"]),
    requested_at_ms=st.integers(min_value=0, max_value=2**53),
)
def test_the_pending_record_is_the_pending_rows_record(
    ticker: str,
    outcome: str,
    count: int,
    price: str,
    correlation_id: str,
    correlation_group: str,
    time_in_force: str,
    self_trade: str,
    requested_at_ms: int,
) -> None:
    """For any order, the fields made without the row equal the fields of the pending row
    ``order_row`` makes, and the journal gives that row back from them."""
    side = "bid" if outcome == "yes" else "ask"
    request = FireRequest(
        OrderTemplate(ticker, outcome, side),  # type: ignore[arg-type]
        price,
        count,
        0,
        correlation_id,
        correlation_group,
        False,
    )
    prepared = PreparedOrder(request, "0badcafe" + "1" * 24, correlation_id)
    policy = OrderPolicy(time_in_force=time_in_force, self_trade_prevention_type=self_trade)
    row = order_row(prepared, policy, OrderRowKind.PENDING, requested_at_ms)
    fields = pending_record(prepared, policy, requested_at_ms)
    assert fields == row_record_fields(row)
    assert decode_record(frame_record(fields)[:-1]) == row


def test_ids_drawn_ahead_are_taken_once_each_and_drawn_again() -> None:
    """take() hands out the ids drawn ahead, never one twice, draws inline when none is left,
    and draw_ahead() keeps IDS_DRAWN_AHEAD ready; every id carries the prefix."""
    ids = ClientOrderIds("0badcafe")
    first = ids.take()  # none drawn yet: drawn inline
    ids.draw_ahead()
    ready = list(ids._ahead)
    assert len(ready) == IDS_DRAWN_AHEAD
    taken = [ids.take() for _ in range(IDS_DRAWN_AHEAD)]
    assert sorted(taken) == sorted(ready) and ids._ahead == []
    extra = ids.take()
    ids.draw_ahead()
    everything = [first, *taken, extra, *ids._ahead]
    assert len(set(everything)) == len(everything)
    assert all(value.startswith("0badcafe") and len(value) == 32 for value in everything)
