"""The fire path: what happens to an accepted wake after its ack is on the wire."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

FALLBACK_STEP: Final = 0.01
"""Tick used when no range of the market's grid covers the price: one cent."""


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
