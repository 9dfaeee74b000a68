"""The fake exchange's order groups, without I/O (Kalshi's ``getting_started/order_groups``).

A group has a contracts limit over a rolling 15-second window and a state: **active** (orders may
be placed; matched contracts are counted) or **triggered** (its resting orders were cancelled, new
orders of the group are rejected until a reset). It is triggered by hand (``PUT .../trigger``)
or when the contracts matched in the last 15 s exceed the limit; a reset clears the state and the
window. :class:`OrderGroups` keeps them and answers the published shapes
(``create-order-group.yaml``, ``get-order-group.yaml``); the account
(``executor.fake.book.account``) does the cancelling, since it holds the book.

Every change is announced to :attr:`OrderGroups.watchers` as a :class:`GroupEvent`, in the
published ``order_group_updates`` vocabulary (``created``, ``triggered``, ``reset``), so a stream
of them hooks in there.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

import orjson

from executor.clock import wall_ms
from executor.fake.routes import ErrorReply

WINDOW_MS: Final = 15_000
"""The rolling window a group's contracts limit is measured over (the published 15 s)."""
MAX_CONTRACTS_LIMIT: Final = 1_000_000
"""The largest limit the guide allows (1-1,000,000)."""

GroupEventKind = Literal["created", "triggered", "reset"]


@dataclass(frozen=True)
class GroupEvent:
    """One change to an order group, as the watchers see it.

    Attributes:
        kind: ``created``, ``triggered`` or ``reset`` (the published ``event_type`` values).
        order_group_id: the group.
        contracts_limit_fp: the limit, fixed-point (present for ``created`` only, as published).
        ts_ms: when it happened (wall-clock ms).
    """

    kind: GroupEventKind
    order_group_id: str
    contracts_limit_fp: str | None
    ts_ms: int


@dataclass
class FakeOrderGroup:
    """One group: its limit, its state, its orders and the contracts it matched lately."""

    order_group_id: str
    contracts_limit: Decimal
    exchange_index: int
    triggered: bool = False
    order_ids: list[str] = field(default_factory=list)
    matched: deque[tuple[int, Decimal]] = field(default_factory=deque)


def _fixed_point(amount: Decimal) -> str:
    return f"{amount:.2f}"


class OrderGroups:
    """Every order group of the account.

    Attributes:
        groups: by id.
        watchers: called with every :class:`GroupEvent`, in order (a watcher must not raise).
    """

    def __init__(self) -> None:
        self.groups: dict[str, FakeOrderGroup] = {}
        self.watchers: list[Callable[[GroupEvent], None]] = []

    def create(self, body: bytes) -> dict[str, Any]:
        """``POST /portfolio/order_groups/create``: a new active group (published response).

        Raises:
            ErrorReply: 400 for a body without a whole limit in 1..1,000,000.
        """
        try:
            request = orjson.loads(body) if body.strip() else {}
        except orjson.JSONDecodeError:
            raise ErrorReply(400, "invalid_parameters", "malformed order group body") from None
        if not isinstance(request, dict):
            raise ErrorReply(400, "invalid_parameters", "order group body is not an object")
        limit = _limit(request)
        index = request.get("exchange_index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            raise ErrorReply(400, "invalid_parameters", f"exchange_index {index!r}")
        group = FakeOrderGroup(uuid.uuid4().hex, limit, index)
        self.groups[group.order_group_id] = group
        self._announce("created", group)
        return {"order_group_id": group.order_group_id, "subaccount": 0, "exchange_index": index}

    def find(self, order_group_id: str) -> FakeOrderGroup:
        """The group of that id.

        Raises:
            ErrorReply: 404 when there is none.
        """
        group = self.groups.get(order_group_id)
        if group is None:
            raise ErrorReply(404, "not_found", f"no order group {order_group_id}")
        return group

    def describe(self, order_group_id: str) -> dict[str, Any]:
        """``GET /portfolio/order_groups/{id}``: the published ``GetOrderGroupResponse``."""
        group = self.find(order_group_id)
        return {
            "is_auto_cancel_enabled": True,
            "contracts_limit_fp": _fixed_point(group.contracts_limit),
            "orders": list(group.order_ids),
            "exchange_index": group.exchange_index,
        }

    def admit(self, order: dict[str, Any]) -> FakeOrderGroup | None:
        """The group an order to be placed names (None: none), if it may be placed in it.

        Raises:
            ErrorReply: 400 for an unknown group or a triggered one (new orders are rejected
                until the group is reset, as the guide says).
        """
        order_group_id = order.get("order_group_id")
        if order_group_id is None:
            return None
        if not isinstance(order_group_id, str) or order_group_id not in self.groups:
            raise ErrorReply(400, "order_group_not_found", f"no order group {order_group_id!r}")
        group = self.groups[order_group_id]
        if group.triggered:
            raise ErrorReply(
                400,
                "order_group_triggered",
                f"order group {order_group_id} is triggered: reset it to place orders",
            )
        return group

    def matched(self, group: FakeOrderGroup, contracts: Decimal, now_ms: int) -> bool:
        """Count ``contracts`` matched in ``group`` now; whether the limit is now exceeded."""
        if contracts <= 0:
            return False
        group.matched.append((now_ms, contracts))
        while group.matched and group.matched[0][0] <= now_ms - WINDOW_MS:
            group.matched.popleft()
        return not group.triggered and sum(amount for _, amount in group.matched) > (
            group.contracts_limit
        )

    def mark_triggered(self, group: FakeOrderGroup) -> None:
        """Put ``group`` in the triggered state (its orders are the account's to cancel)."""
        group.triggered = True
        self._announce("triggered", group)

    def reset(self, order_group_id: str) -> None:
        """``PUT .../reset``: active again, the rolling window cleared."""
        group = self.find(order_group_id)
        group.triggered = False
        group.matched.clear()
        self._announce("reset", group)

    def _announce(self, kind: GroupEventKind, group: FakeOrderGroup) -> None:
        limit = _fixed_point(group.contracts_limit) if kind == "created" else None
        event = GroupEvent(kind, group.order_group_id, limit, wall_ms())
        for watcher in self.watchers:
            watcher(event)


def _limit(request: dict[str, Any]) -> Decimal:
    """The request's limit (``contracts_limit`` or ``contracts_limit_fp``; equal if both)."""
    whole, fixed = request.get("contracts_limit"), request.get("contracts_limit_fp")
    limits: list[Decimal] = []
    if whole is not None:
        if not isinstance(whole, int) or isinstance(whole, bool):
            raise ErrorReply(400, "invalid_parameters", "contracts_limit must be an integer")
        limits.append(Decimal(whole))
    if fixed is not None:
        try:
            limits.append(Decimal(str(fixed)))
        except InvalidOperation:
            raise ErrorReply(
                400, "invalid_parameters", "contracts_limit_fp is not a number"
            ) from None
    if not limits or len(set(limits)) != 1:
        raise ErrorReply(400, "invalid_parameters", "give contracts_limit (or the same _fp)")
    if not 1 <= limits[0] <= MAX_CONTRACTS_LIMIT:
        raise ErrorReply(
            400, "invalid_parameters", f"contracts_limit must be 1 to {MAX_CONTRACTS_LIMIT}"
        )
    return limits[0]


__all__ = [
    "MAX_CONTRACTS_LIMIT",
    "WINDOW_MS",
    "FakeOrderGroup",
    "GroupEvent",
    "GroupEventKind",
    "OrderGroups",
]
