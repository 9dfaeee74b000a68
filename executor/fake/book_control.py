"""The fake exchange's controls over the book: batch cancels, order groups, rate-limit answers.

A mixin of :class:`executor.fake.account.FakeAccount`, which holds the book and cancels a resting
order (``cancel_resting``, announced to its watchers); here are the endpoints that act on many
orders at once: ``DELETE /portfolio/events/orders/batched`` (V2, ``batch-cancel-orders-v2.yaml``),
the order-group endpoints (create, get, trigger, reset: ``executor.fake.groups`` keeps the
groups; a trigger cancels the group's resting orders here) and the two ``/account`` endpoints of
the rate limits (``executor.fake.limits``). No I/O.
"""

from __future__ import annotations

from typing import Any

import orjson

from executor.fake.groups import FakeOrderGroup, OrderGroups
from executor.fake.limits import FakeApiLimits
from executor.fake.orders import BookOrder
from executor.fake.routes import ErrorReply


class BookControl:
    """Endpoints acting on many orders; the account provides the book and single cancels."""

    book: dict[str, BookOrder]
    order_groups: OrderGroups
    api_limits: FakeApiLimits

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
        self.trigger_group(self.order_groups.find(params["order_group_id"]))
        return {}

    def put_group_reset(self, params: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        """``PUT .../reset``: the group takes orders again."""
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


__all__ = ["BookControl", "parse_batch_cancel"]
