"""The small interfaces the exchange's rooms share, each defined once.

``SignedReader`` is what a signed ``GET`` needs of the REST client (lookups, the account's limits,
the account poll); ``OrderSink`` is the part of ``executor.telemetry.Telemetry`` the order path and
the account poll write to. Plain protocols, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from executor.recording.orders.intent_journal import RecordFields
from executor.recording.rows import HeartbeatRow, LatencyRow, OrderRow

RESOLUTION_TIMEOUT_S: Final = 2.0
"""Longest a fire task waits for room for an undroppable order row (seconds), shielded from
cancellation so a shutdown still lands it (DISPATCH.md §4 step 7)."""


class SignedReader(Protocol):
    """The part of ``executor.exchange.orders.transport.ExchangeClient`` a signed read uses."""

    async def get_json(
        self, path: str, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...


class OrderSink(Protocol):
    """The part of ``executor.telemetry.Telemetry`` the order path writes to."""

    def record(self, row: LatencyRow) -> None: ...

    def record_intent(self, fields: RecordFields) -> None: ...

    def record_pending(self, row: OrderRow) -> None: ...

    async def record_order(
        self, row: OrderRow | HeartbeatRow, *, timeout_s: float = RESOLUTION_TIMEOUT_S
    ) -> None: ...


__all__ = ["RESOLUTION_TIMEOUT_S", "OrderSink", "SignedReader"]
