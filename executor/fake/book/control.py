"""The fake exchange's controls over the book: batch cancels, order groups, rate-limit answers,
pauses.

A mixin of :class:`executor.fake.book.account.FakeAccount`, which holds the book and cancels a
resting order (``cancel_resting``, announced to its watchers); here are the endpoints that act on
many orders at once: ``DELETE /portfolio/events/orders/batched`` (V2,
``batch-cancel-orders-v2.yaml``), the order-group endpoints (create, get, trigger, reset:
``executor.fake.book.groups`` keeps the groups; a trigger cancels the group's resting orders here),
the two ``/account`` endpoints of the rate limits (``executor.fake.limits``) and the pauses
(:class:`ExchangePauses`). No I/O.

Pauses follow Kalshi's ``getting_started/maintenance_and_pauses``: a **trading pause** (no
placing or amending; cancels go through; every Thursday 03:00-05:00 ET) and an **exchange pause**
(nothing at all: a batch cancel and a group's trigger or reset are refused too). A pause is set
by hand (:meth:`BookControl.set_pause`; ``python -m executor.fake --pause trading``, SIGUSR1) or,
with ``weekly`` on (``--weekly-pause``), by the published weekly window read off the fake's
clock; ``GET /exchange/status`` answers the published ``ExchangeStatus`` from it
(``get-exchange-status.yaml``).
"""

from __future__ import annotations

import datetime
import zoneinfo
from collections.abc import Callable
from typing import Any, Final, Literal

import orjson

from executor.clock import wall_ms
from executor.fake.book.groups import FakeOrderGroup, OrderGroups
from executor.fake.book.orders import BookOrder
from executor.fake.limits import FakeApiLimits
from executor.fake.routes import ErrorReply

PauseKind = Literal["trading", "exchange"]

EXCHANGE_TIME_ZONE: Final = zoneinfo.ZoneInfo("America/New_York")
"""The zone of the published schedule ("Thursday 3:00 AM to 5:00 AM ET")."""
WEEKLY_PAUSE_WEEKDAY: Final = 3
"""Thursday (Monday is 0)."""
WEEKLY_PAUSE_HOURS: Final = (3, 5)
"""The weekly trading pause: from 03:00 to 05:00 ET (the end excluded)."""

TRADING_PAUSED_CODE: Final = "trading_is_paused"
"""The code an order gets in a pause. Kalshi does not publish its error codes: a guess."""
EXCHANGE_PAUSED_CODE: Final = "exchange_paused"
"""The code anything gets in an exchange pause (a guess, as above)."""


def in_weekly_pause(now_ms: int) -> bool:
    """Whether ``now_ms`` (Unix ms) falls in the weekly trading pause (Thursday 03:00-05:00 ET)."""
    moment = datetime.datetime.fromtimestamp(now_ms / 1000, tz=EXCHANGE_TIME_ZONE)
    start, end = WEEKLY_PAUSE_HOURS
    return moment.weekday() == WEEKLY_PAUSE_WEEKDAY and start <= moment.hour < end


def weekly_resume_time(now_ms: int) -> str:
    """The end of the weekly pause ``now_ms`` is in, as an RFC 3339 UTC time."""
    moment = datetime.datetime.fromtimestamp(now_ms / 1000, tz=EXCHANGE_TIME_ZONE)
    end = moment.replace(hour=WEEKLY_PAUSE_HOURS[1], minute=0, second=0, microsecond=0)
    return end.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ExchangePauses:
    """Whether the fake exchange is paused now, and how.

    Args:
        clock: the exchange's wall clock (Unix ms).
        weekly: follow the published weekly trading pause.

    Attributes:
        kind: the pause set by hand (``trading``, ``exchange``) or None.
        resume_time: the estimated resume time a pause set by hand announces (RFC 3339), or None.
    """

    def __init__(self, clock: Callable[[], int] = wall_ms, *, weekly: bool = False) -> None:
        self._clock = clock
        self.weekly = weekly
        self.kind: PauseKind | None = None
        self.resume_time: str | None = None

    def pause(self, kind: PauseKind | None, resume_time: str | None = None) -> None:
        """Pause (``trading`` or ``exchange``) or resume (None) by hand."""
        self.kind = kind
        self.resume_time = resume_time if kind is not None else None

    def now(self) -> PauseKind | None:
        """The pause in force now: the one set by hand, else the weekly one, else None."""
        if self.kind is not None:
            return self.kind
        if self.weekly and in_weekly_pause(self._clock()):
            return "trading"
        return None

    def status(self) -> dict[str, Any]:
        """``GET /exchange/status``: the published ``ExchangeStatus``."""
        kind = self.now()
        answer: dict[str, Any] = {
            "exchange_active": kind != "exchange",
            "trading_active": kind is None,
        }
        if kind is not None:
            resume = self.resume_time
            if resume is None and self.kind is None:  # the weekly window's own end
                resume = weekly_resume_time(self._clock())
            answer["exchange_estimated_resume_time"] = resume
        return answer

    def refuse_placing(self) -> None:
        """Raise when no order may be placed now.

        Raises:
            ErrorReply: 400 in any pause (the guide: no placing in either).
        """
        kind = self.now()
        if kind is not None:
            code = TRADING_PAUSED_CODE if kind == "trading" else EXCHANGE_PAUSED_CODE
            raise ErrorReply(400, code, f"{kind} is paused: no orders may be placed")

    def refuse_changes(self) -> None:
        """Raise when nothing may change now (a cancel, an order group's trigger or reset).

        Raises:
            ErrorReply: 400 in an exchange pause (a trading pause allows cancels).
        """
        if self.now() == "exchange":
            raise ErrorReply(400, EXCHANGE_PAUSED_CODE, "the exchange is paused: nothing changes")


class BookControl:
    """Endpoints acting on many orders; the account provides the book and single cancels."""

    book: dict[str, BookOrder]
    order_groups: OrderGroups
    api_limits: FakeApiLimits
    pauses: ExchangePauses

    def cancel_resting(self, client_order_id: str) -> BookOrder:
        """Cancel one resting order (the account's)."""
        raise NotImplementedError

    def delete_orders_batched(
        self, params: dict[str, str], query: str, body: bytes
    ) -> dict[str, Any]:
        """``DELETE /portfolio/events/orders/batched``: cancel each order named (V2 shape)."""
        return self.batch_cancel(body)

    def post_order_group(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``POST /portfolio/order_groups/create``."""
        return self.order_groups.create(body)

    def get_order_group(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /portfolio/order_groups/{order_group_id}``."""
        return self.order_groups.describe(params["order_group_id"])

    def put_group_trigger(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``PUT .../trigger``: cancel the group's resting orders, refuse new ones until reset."""
        self.pauses.refuse_changes()
        self.trigger_group(self.order_groups.find(params["order_group_id"]))
        return {}

    def put_group_reset(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``PUT .../reset``: the group takes orders again."""
        self.pauses.refuse_changes()
        self.order_groups.reset(params["order_group_id"])
        return {}

    def get_account_limits(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /account/limits``."""
        return self.api_limits.limits_answer()

    def get_endpoint_costs(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``GET /account/endpoint_costs``."""
        return self.api_limits.costs_answer()

    def trigger_group(self, group: FakeOrderGroup) -> None:
        """Trigger ``group``: its resting orders cancelled, then the group marked triggered."""
        for order in list(self.book.values()):
            if order.order_group_id == group.order_group_id and order.status == "resting":
                self.cancel_resting(self._book_key(order))
        self.order_groups.mark_triggered(group)

    def set_pause(self, kind: PauseKind | None, resume_time: str | None = None) -> list[BookOrder]:
        """Pause (``trading`` or ``exchange``) or resume (None) by hand; a pause's start cancels
        the resting orders placed with ``cancel_order_on_pause`` (:meth:`pause_trading`)."""
        began = kind is not None and self.pauses.now() is None
        self.pauses.pause(kind, resume_time)
        return self.pause_trading() if began else []

    def pause_trading(self) -> list[BookOrder]:
        """A trading pause begins: the resting orders placed with ``cancel_order_on_pause`` are
        cancelled (the others rest on, as the maintenance guide says); the cancelled ones."""
        paused = [
            order
            for order in self.book.values()
            if order.status == "resting" and order.cancel_order_on_pause
        ]
        return [self.cancel_resting(self._book_key(order)) for order in paused]

    def batch_cancel(self, body: bytes) -> dict[str, Any]:
        """Cancel each order of a ``BatchCancelOrdersV2Request``; the V2 response (an order that
        is not resting gets ``reduced_by`` 0 and an ``error``, as published)."""
        order_ids = parse_batch_cancel(body)
        self.pauses.refuse_changes()
        by_order_id = {order.order_id: order for order in self.book.values()}
        answers: list[dict[str, Any]] = []
        for order_id in order_ids:
            order = by_order_id.get(order_id)
            if order is None or order.status != "resting":
                code, why = (
                    ("not_found", "no such order")
                    if order is None
                    else (
                        "order_not_resting",
                        f"order is {order.status}",
                    )
                )
                answers.append(
                    {
                        "order_id": order_id,
                        "client_order_id": None if order is None else order.client_order_id,
                        "reduced_by": "0.00",
                        "ts_ms": None,
                        "error": {"code": code, "message": why},
                    }
                )
                continue
            left = order.remaining
            self.cancel_resting(self._book_key(order))
            answers.append(
                {
                    "order_id": order_id,
                    "client_order_id": order.client_order_id,
                    "reduced_by": f"{left:.2f}",
                    "ts_ms": order.updated_ms,
                }
            )
        return {"orders": answers}

    def _book_key(self, order: BookOrder) -> str:
        return order.client_order_id or order.order_id


def parse_batch_cancel(body: bytes) -> list[str]:
    """The order ids of a ``BatchCancelOrdersV2Request``.

    Raises:
        ErrorReply: 400 for a body that is not one (no ``orders`` list of objects with an id).
    """
    try:
        request = orjson.loads(body)
        orders = request["orders"]
        order_ids = [entry["order_id"] for entry in orders]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise ErrorReply(400, "invalid_parameters", "malformed batch cancel body") from None
    if not isinstance(orders, list) or not all(isinstance(oid, str) for oid in order_ids):
        raise ErrorReply(400, "invalid_parameters", "orders must be a list of order ids")
    return order_ids


__all__ = [
    "EXCHANGE_PAUSED_CODE",
    "TRADING_PAUSED_CODE",
    "BookControl",
    "ExchangePauses",
    "PauseKind",
    "in_weekly_pause",
    "parse_batch_cancel",
    "weekly_resume_time",
]
