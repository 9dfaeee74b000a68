"""The order group: a kill the exchange enforces (Kalshi's ``getting_started/order_groups``).

Every real order goes into one group this executor creates at start-up
(``POST /portfolio/order_groups/create``, a contracts limit over a rolling 15 s window; the
order body's ``order_group_id``). Triggering the group (``PUT .../trigger``) makes the exchange
cancel the group's resting orders and reject its new ones until a reset (``PUT .../reset``), so
a halt holds on the exchange's side even for orders this process no longer knows of, and the
exchange triggers it by itself when more contracts match within 15 s than the limit allows.

:class:`OrderGroup` holds the group's id and whether this executor has it triggered; its
:meth:`~OrderGroup.trigger` and :meth:`~OrderGroup.reset` ask the exchange (write tokens behind
every waiting order), log, count, and never raise: a caller that must halt (the audit trail is
gone, the kill switch engaged) cannot do more than ask, and asks again on its next look.
"""

from __future__ import annotations

from typing import Any

import orjson
import structlog

from executor.exchange.book.cancels import BookWriter
from executor.exchange.halts import ExchangeHalts
from executor.exchange.messages import ORDER_GROUP_CREATE_PATH, ORDER_GROUPS_PATH, ExchangeError

log = structlog.get_logger()


async def create_order_group(writer: BookWriter, contracts_limit: int) -> str:
    """A new order group's id (``POST /portfolio/order_groups/create``).

    Raises:
        ExchangeError: the request failed, or the answer has no ``order_group_id``.
    """
    body = orjson.dumps({"contracts_limit": contracts_limit})
    payload = await writer.send_json("POST", ORDER_GROUP_CREATE_PATH, body)
    group_id = payload.get("order_group_id")
    if not isinstance(group_id, str) or not group_id:
        raise ExchangeError(f"order group answer has no order_group_id: {payload!r:.200}")
    return group_id


class OrderGroup:
    """One order group and what this executor has asked of it.

    Args:
        writer: signed writes (the transport).
        order_group_id: the group's id.
        contracts_limit: its limit, as created (for the logs).
        halts: told of this executor's own triggers and resets (so its own trigger, heard back
            on the stream, is not taken for the exchange's); None tells nobody.

    Attributes:
        triggered: whether the last request that succeeded was a trigger.
        triggers / resets: requests of each kind the exchange accepted.
        failures: requests that failed (logged; asked again by the caller's next look).
    """

    def __init__(
        self,
        writer: BookWriter,
        order_group_id: str,
        contracts_limit: int,
        halts: ExchangeHalts | None = None,
    ) -> None:
        self._writer = writer
        self.halts = halts
        self.order_group_id = order_group_id
        self.contracts_limit = contracts_limit
        self.triggered = False
        self.triggers = 0
        self.resets = 0
        self.failures = 0

    async def trigger(self, reason: str) -> bool:
        """Trigger the group (its resting orders cancelled, new ones refused); whether the
        exchange accepted. Never raises for the exchange's sake.

        Cancellation: a request cut short may have reached the exchange; ``triggered`` then
        still says False, and the next trigger asks again (a trigger is idempotent).
        """
        if self.halts is not None:
            self.halts.own_trigger(True)
        if await self._put("trigger", reason):
            self.triggered = True
            self.triggers += 1
            log.warning("order group triggered", order_group_id=self.order_group_id, reason=reason)
            return True
        if self.halts is not None:
            self.halts.own_trigger(self.triggered)
        return False

    async def reset(self, reason: str) -> bool:
        """Reset the group (orders may be placed in it again); whether the exchange accepted.

        Cancellation: as :meth:`trigger`.
        """
        if await self._put("reset", reason):
            self.triggered = False
            if self.halts is not None:
                self.halts.own_reset()
            self.resets += 1
            log.warning("order group reset", order_group_id=self.order_group_id, reason=reason)
            return True
        return False

    async def _put(self, action: str, reason: str) -> bool:
        path = f"{ORDER_GROUPS_PATH}/{self.order_group_id}/{action}"
        try:
            answer: dict[str, Any] = await self._writer.send_json("PUT", path, b"{}")
        except ExchangeError as error:
            self.failures += 1
            log.error(
                f"order group {action} failed",
                order_group_id=self.order_group_id,
                reason=reason,
                error=str(error),
            )
            return False
        del answer  # an EmptyResponse
        return True


__all__ = ["OrderGroup", "create_order_group"]
