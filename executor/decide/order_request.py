"""What a fire hands to a dispatcher: the cached order template and the fire request (no I/O).

Kept apart from ``executor.fire.path`` so the dispatcher below it can name these types without
importing the fire path above it (layers run one way; STYLE.md, "The order path").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final, Literal

from executor.wire.protocol import Direction

Side = Literal["bid", "ask"]
"""The order's side of the YES book: ``bid`` for a "yes" decision, ``ask`` for a "no" one."""

SIDE_FOR_DIRECTION: Final[Mapping[Direction, Side]] = {"yes": "bid", "no": "ask"}
"""The wake's ``direction`` to the order's side; the price is always the YES-side price."""


@dataclasses.dataclass(frozen=True, slots=True)
class OrderTemplate:
    """The per-market, per-direction part of an order, built once and reused."""

    market_ticker: str
    outcome: Direction
    side: Side


@dataclasses.dataclass(frozen=True, slots=True)
class FireRequest:
    """Everything a dispatcher needs to place (or pretend to place) one order.

    Attributes:
        template: the cached order template for the wake's market and direction.
        price: the snapped YES-side price, formatted with four decimals.
        count: contracts (configured, or sized: DISPATCH.md §2).
        exchange_index: the wake's ``exchange_index``.
        correlation_id: the wake's ``correlation_id``.
        correlation_group: the wake's ``correlation_group``.
        dry_run: True for a shadow fire, which must place nothing.
    """

    template: OrderTemplate
    price: str
    count: int
    exchange_index: int
    correlation_id: str
    correlation_group: str
    dry_run: bool
