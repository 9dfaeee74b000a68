"""The orders the account poll keeps asking about: every row not final, each with its backoff.

An order stays open until the exchange says how it ended: it rests on the book (good_till_canceled
with contracts remaining, or ``accepted`` without saying what remains), it was answered without a
fill count (``submitted``), or its outcome is unknown (a lookup found it neither listed nor, by
the exchange's own timestamp, absent; or could not ask). :class:`FollowedOrders` holds them for
``executor.exchange.follow.reconcile.Reconciler``, which asks about the ones due at each account
poll.

An order found on the book is asked about at every poll, as it may fill at any moment. An order
whose lookup ended unknown backs off: after its k-th unknown answer in a row it sits out
``min(2**(k-1), FOLLOW_BACKOFF_MAX_POLLS) - 1`` polls (the next poll, then every 2nd, 4th, 8th,
16th), so an exchange that cannot be asked for an hour costs a few lookups per order, not 120.
Start-up asks about every open row whatever its backoff. Counting polls rather than seconds keeps
the schedule a plain function of what happened (no clock to read, nothing to race).

No I/O, no Trio: data the reconciler mutates from the Trio thread.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Final

from executor.recording.rows import OrderRow

FOLLOW_BACKOFF_MAX_POLLS: Final = 16
"""At most one lookup per this many polls for an order whose outcome stays unknown: 8 min at the
30 s account poll, so an order the exchange lists late is still found within minutes of its
listing however long it was unknown. A judgement call."""


@dataclass(slots=True)
class Followed:
    """One open order: its last row, why its outcome is unknown (None: it is on the book, or was
    answered without a fill count, and its ``error_message`` is kept), and its backoff."""

    row: OrderRow
    cause: str | None
    unknown_streak: int = 0
    """Lookups in a row that ended unknown (0 once it was found)."""
    polls_to_skip: int = 0
    """Account polls this order sits out before it is asked about again."""


class FollowedOrders(MutableMapping[str, OrderRow]):
    """The open orders being followed: a mapping of ``client_order_id`` to the order's last row
    (what the stream reads and updates, ``executor.exchange.stream.orders``), with each order's
    cause and backoff beside it.

    Setting a row keeps the order's cause and asks about it at the next poll (news came);
    :meth:`found`, :meth:`unknown` and :meth:`drop` are the reconciler's verbs.
    """

    def __init__(self) -> None:
        self._orders: dict[str, Followed] = {}

    def __getitem__(self, client_order_id: str) -> OrderRow:
        return self._orders[client_order_id].row

    def __setitem__(self, client_order_id: str, row: OrderRow) -> None:
        self.found(row, self.cause_of(client_order_id))

    def __delitem__(self, client_order_id: str) -> None:
        del self._orders[client_order_id]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._orders))

    def __len__(self) -> int:
        return len(self._orders)

    def cause_of(self, client_order_id: str) -> str | None:
        """Why a followed order's outcome is unknown (None: on the book, or not followed)."""
        followed = self._orders.get(client_order_id)
        return None if followed is None else followed.cause

    def found(self, row: OrderRow, cause: str | None) -> None:
        """The exchange has the order and it may still change: ask at every poll."""
        self._orders[row.client_order_id] = Followed(row, cause)

    def replace_row(self, row: OrderRow, cause: str | None) -> None:
        """A followed order's row moved on and its outcome is still unknown: its backoff stands
        (its cause too, unless a new one is given)."""
        followed = self._orders[row.client_order_id]
        followed.row = row
        followed.cause = cause or followed.cause

    def unknown(self, row: OrderRow, cause: str | None) -> None:
        """A lookup ended unknown: follow the order (its row as given) and back off once more."""
        previous = self._orders.get(row.client_order_id)
        streak = 1 if previous is None else previous.unknown_streak + 1
        skip = min(2 ** (streak - 1), FOLLOW_BACKOFF_MAX_POLLS) - 1
        self._orders[row.client_order_id] = Followed(row, cause, streak, skip)

    def drop(self, client_order_id: str) -> None:
        """Stop following an order (it ended, or the exchange no longer has it)."""
        self._orders.pop(client_order_id, None)

    def entries(self) -> list[Followed]:
        """Every followed order with its cause, whatever its backoff."""
        return list(self._orders.values())

    def due(self) -> list[Followed]:
        """The orders to ask about at this poll; every other one is one poll nearer its turn."""
        due: list[Followed] = []
        for followed in self._orders.values():
            if followed.polls_to_skip > 0:
                followed.polls_to_skip -= 1
            else:
                due.append(followed)
        return due


__all__ = ["FOLLOW_BACKOFF_MAX_POLLS", "Followed", "FollowedOrders"]
