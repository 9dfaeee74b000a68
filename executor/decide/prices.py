"""Prices: the untradeable-price refusal, the snap to the market's tick grid, the order request.

Pure and synchronous (SERVICE.md's fire path steps 1, 2 and 4; DISPATCH.md §1 steps 1-2).
:func:`checked_price` gives a wake's snapped price or the reason it cannot be traded;
:class:`RequestBuilder` turns a snapped price and a count into the :class:`FireRequest` an exchange
or a no-network dispatcher is handed, reusing one :class:`OrderTemplate` per market and direction.

Prices that cannot be snapped: the decoder refuses NaN and ``1e400``, but a finite price can still
defeat the snap (``1e308 / 0.01`` overflows to infinity and ``round`` raises ``OverflowError``; a
step product can round up past the largest double). Any fire, shadow or real, whose price cannot
be snapped to a finite number is refused. A shadow fire with a finite price outside (0, 1) is
still snapped: shadow fires exist to keep measuring.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from executor.decide.order_request import SIDE_FOR_DIRECTION, FireRequest, OrderTemplate
from executor.wire.protocol import Direction, WakeMessage

FALLBACK_STEP: Final = 0.01
"""Tick used when no range of the market's grid covers the price: one cent."""

PRICE_DECIMALS: Final = 4
"""Decimals of the price string sent with an order (SERVICE.md: ``f"{wire_price:.4f}"``)."""

OUTSIDE_THE_BOOK: Final = "price not strictly between 0 and 1"
CANNOT_SNAP: Final = "price cannot be snapped to a finite tick"
SNAPPED_OUTSIDE_THE_BOOK: Final = "snapped price not strictly between 0 and 1"


def snap_to_grid(price: float, ranges: Sequence[Sequence[float]]) -> float:
    """Snap ``price`` to the tick grid of the first range that covers it.

    A range ``[start, end, step]`` covers ``price`` when ``step > 0`` and
    ``start <= price <= end`` (both ends inclusive). With no covering range the one-cent grid is
    used. Rounding is Python's ``round``: half to even, as the reference does.
    """
    for start, end, step in ranges:
        if step > 0 and start <= price <= end:
            return round(price / step) * step
    return round(price / FALLBACK_STEP) * FALLBACK_STEP


def snap_or_nan(price: float, ranges: Sequence[Sequence[float]]) -> float:
    """``snap_to_grid``, or NaN where it cannot produce a number (NaN, infinity, overflow)."""
    try:
        return snap_to_grid(price, ranges)
    except (OverflowError, ValueError):  # round(inf) and round(nan)
        return math.nan


def checked_price(message: WakeMessage) -> float | str:
    """The wake's snapped price, or why it cannot be traded (one of the three texts above).

    A real fire must be strictly inside (0, 1) before and after the snap ([ours] after: 0.003 on a
    cent grid snaps to 0.0); a shadow fire only needs a finite snapped price.
    """
    dry_run = message.dry_run
    price = message.wire_price_yes_dollars
    if not dry_run and not 0.0 < price < 1.0:  # NaN fails the comparison too
        return OUTSIDE_THE_BOOK
    wire_price = snap_or_nan(price, message.price_ranges)
    if not math.isfinite(wire_price):
        return CANNOT_SNAP
    if not dry_run and not 0.0 < wire_price < 1.0:
        return SNAPPED_OUTSIDE_THE_BOOK
    return wire_price


class RequestBuilder:
    """Builds fire requests, with one cached template per (market, direction).

    Not safe to share between threads; no I/O, never checkpoints.
    """

    def __init__(self) -> None:
        self._templates: dict[tuple[str, Direction], OrderTemplate] = {}

    @property
    def templates_built(self) -> int:
        """How many order templates have been built (one per distinct market and direction)."""
        return len(self._templates)

    def request(self, message: WakeMessage, wire_price: float, count: int) -> FireRequest:
        """The request for ``count`` contracts of the wake's order at the snapped ``wire_price``."""
        key = (message.market_ticker, message.direction)
        template = self._templates.get(key)
        if template is None:
            template = OrderTemplate(key[0], key[1], SIDE_FOR_DIRECTION[key[1]])
            self._templates[key] = template
        return FireRequest(
            template=template,
            price=f"{wire_price:.{PRICE_DECIMALS}f}",
            count=count,
            exchange_index=message.exchange_index,
            correlation_id=message.correlation_id,
            correlation_group=message.correlation_group,
            dry_run=message.dry_run,
        )


__all__ = [
    "CANNOT_SNAP",
    "FALLBACK_STEP",
    "OUTSIDE_THE_BOOK",
    "PRICE_DECIMALS",
    "SNAPPED_OUTSIDE_THE_BOOK",
    "RequestBuilder",
    "checked_price",
    "snap_or_nan",
    "snap_to_grid",
]
