"""The account poll's backoff for open orders (``executor.exchange.follow.follow_up``).

An order whose lookups keep ending unknown is asked about at the next poll, then every 2nd, 4th,
8th and 16th, and never less often than every ``FOLLOW_BACKOFF_MAX_POLLS``; a fresh order is
asked at once; an order the exchange has found is asked at every poll, and one that ended (or
that the exchange does not have) is no longer asked. :class:`FollowedOrders` is driven poll by
poll without I/O; the last tests drive the :class:`Reconciler`'s poll against a scripted reader
and count what the exchange was asked.
"""

from __future__ import annotations

import dataclasses
import itertools

from executor.clock import wall_ms
from executor.exchange.follow.follow_up import FOLLOW_BACKOFF_MAX_POLLS, FollowedOrders
from executor.exchange.follow.lookup import ABSENCE_MARGIN_MS
from executor.exchange.follow.reconcile import Reconciler
from executor.recording.orders.terms import NO_SUCH_ORDER_PREFIX, RECONCILED_PREFIX
from executor.recording.rows import OrderStatus
from tests.exchange.test_lookups import LISTED_FILL, NO_WAIT, ScriptedReader, unknown_row
from tests.exchange.test_reconcile import Rows
from tests.support.orders import TICKER

CAUSE = "no response within 0.5 s"


def asked_at(orders: FollowedOrders, client_order_id: str, polls: int) -> list[int]:
    """Run ``polls`` polls (numbered from 1) in which every lookup of ``client_order_id`` ends
    unknown; the polls that asked about it."""
    asked = []
    for poll in range(1, polls + 1):
        for followed in orders.due():
            if followed.row.client_order_id == client_order_id:
                asked.append(poll)
                orders.unknown(followed.row, followed.cause)
    return asked


def gaps(polls: list[int]) -> list[int]:
    """Polls between one ask and the next."""
    return [later - earlier for earlier, later in itertools.pairwise(polls)]


def test_unknown_answers_wait_one_then_two_four_eight_sixteen_polls_and_never_more() -> None:
    """A row followed and then unknown at every look is asked at polls 1, 2, 4, 8, 16, 32 and
    then every 16th: the waits double from one poll to the cap and stay there."""
    orders = FollowedOrders()
    row = unknown_row("1" * 32, wall_ms())
    orders.found(row, CAUSE)  # followed, not yet asked
    asked = asked_at(orders, row.client_order_id, 200)
    assert FOLLOW_BACKOFF_MAX_POLLS == 16
    assert asked[:6] == [1, 2, 4, 8, 16, 32]
    assert gaps(asked) == [1, 2, 4, 8, 16] + [16] * (len(asked) - 6)
    assert len(asked) == 6 + (200 - 32) // 16


def test_a_fresh_order_is_asked_at_the_next_poll_whoever_else_is_waiting() -> None:
    """An order the fire's lookup left unknown, one followed from start-up and one the stream
    reported, each added while another order sits out its backoff: all three are due at the
    very next poll, and the waiting one is not."""
    orders = FollowedOrders()
    waiting = unknown_row("2" * 32, wall_ms())
    for _ in range(3):  # three unknowns in a row: it now sits out 3 polls
        orders.unknown(waiting, CAUSE)
    fired, started, streamed = (unknown_row(key * 32, wall_ms()) for key in "345")
    orders.unknown(fired, CAUSE)
    orders.found(started, CAUSE)
    orders[streamed.client_order_id] = streamed
    due = {followed.row.client_order_id for followed in orders.due()}
    assert due == {fired.client_order_id, started.client_order_id, streamed.client_order_id}


def test_an_order_found_again_is_asked_every_poll_and_its_backoff_starts_over() -> None:
    """After five unknowns in a row the exchange lists the order (resting): it is asked at every
    poll from then on, and a later unknown waits one poll again, not sixteen."""
    orders = FollowedOrders()
    row = unknown_row("6" * 32, wall_ms())
    orders.found(row, CAUSE)
    asked_at(orders, row.client_order_id, 16)  # asked at 1, 2, 4, 8, 16: five unknowns
    resting = dataclasses.replace(
        row, status=OrderStatus.ACCEPTED, error_message=None, remaining_count="3.00"
    )
    orders.found(resting, None)
    every_poll = [len(orders.due()) for _ in range(5)]
    assert every_poll == [1] * 5
    orders.unknown(resting, None)
    assert asked_at(orders, row.client_order_id, 4) == [1, 3]  # the 1st unknown, then the 2nd


def test_a_dropped_order_is_never_asked_again() -> None:
    """An order that ended, or that the exchange does not have, is dropped: no later poll asks
    about it, however far through its backoff it was."""
    orders = FollowedOrders()
    row = unknown_row("7" * 32, wall_ms())
    orders.unknown(row, CAUSE)
    orders.drop(row.client_order_id)
    assert [orders.due() for _ in range(20)] == [[]] * 20
    assert len(orders) == 0


async def test_the_poll_asks_the_exchange_on_the_backoff_until_it_lists_the_order() -> None:
    """Against an exchange that does not list the order and whose data never covers its send,
    the account poll asks at polls 1, 2, 4, 8, 16, 32 of 40; once the exchange lists it filled,
    its next turn reconciles it and no poll after asks again."""
    now = wall_ms()
    reader = ScriptedReader(as_of_ms=now)  # the data is as of the send: never "absent"
    sink = Rows()
    reconciler = Reconciler(reader, sink, delays_s=NO_WAIT)
    reconciler.follow(unknown_row("8" * 32, now))
    asked = []
    for poll in range(1, 41):
        before = reader.listings(TICKER)
        await reconciler.poll_resting()
        if reader.listings(TICKER) > before:
            asked.append(poll)
    assert asked == [1, 2, 4, 8, 16, 32]
    assert sink.rows == [] and reconciler.lookups_unknown == 6
    reader.listed[TICKER] = [{**LISTED_FILL, "client_order_id": "8" * 32}]
    for _ in range(16 + 10):  # its turn comes within 16 polls; ten more ask nothing
        await reconciler.poll_resting()
    (row,) = sink.rows
    assert (row.status, row.error_message) == (OrderStatus.FILLED, RECONCILED_PREFIX + CAUSE)
    assert reconciler.orders_open == 0 and reader.listings(TICKER) == 7


async def test_an_order_the_exchange_does_not_have_is_no_longer_asked_about() -> None:
    """Unknown twice, then the exchange's data covers the send and the order is not listed:
    absent at its next turn (the row says so) and never asked again."""
    now = wall_ms()
    reader = ScriptedReader(as_of_ms=now)
    sink = Rows()
    reconciler = Reconciler(reader, sink, delays_s=NO_WAIT)
    reconciler.follow(unknown_row("9" * 32, now))
    await reconciler.poll_resting()
    await reconciler.poll_resting()
    reader.as_of_ms = now + ABSENCE_MARGIN_MS + 1
    for _ in range(30):
        await reconciler.poll_resting()
    assert [row.error_message for row in sink.rows] == [NO_SUCH_ORDER_PREFIX + CAUSE]
    assert reconciler.orders_open == 0 and reader.listings(TICKER) == 3
