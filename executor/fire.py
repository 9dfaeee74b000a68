"""The fire path: what happens to an accepted wake after its ack is on the wire.

Per accepted message, in SERVICE.md's order: refuse an untradeable price (real fires only), snap
the price to the market's tick grid, refuse while the kill switch is engaged (real fires only),
take the cached order template for ``(market_ticker, direction)``, count ``fired`` and hand a
``FireRequest`` to the dispatcher.

Prices that cannot be snapped: the decoder refuses NaN and ``1e400``, but a finite price can still
defeat the snap (``1e308 / 0.01`` overflows to infinity and ``round`` raises ``OverflowError``; a
step product can round up past the largest double). A real fire's price is in (0, 1), so only an
absurdly small step (``0.5 / 1e-320`` is infinite) does that to it; a shadow fire's price is not
checked and can be anything. Any fire, shadow or real, whose price cannot be snapped to a finite
number is refused as a price refusal (logged, counted in ``refused_price``). A shadow fire with a
finite price outside (0, 1) is still snapped and dispatched: shadow fires exist to keep measuring.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, Literal

from executor.killswitch import KillSwitch
from executor.logs import RateLimitedWarning
from executor.protocol import Direction, WakeMessage

_price_refusal_warnings: Final = RateLimitedWarning("fire_refused_price")
_kill_switch_refusal_warnings: Final = RateLimitedWarning("fire_refused_kill_switch")

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


Side = Literal["bid", "ask"]
"""The order's side of the YES book: ``bid`` for a "yes" decision, ``ask`` for a "no" one."""

SIDE_FOR_DIRECTION: Final[Mapping[Direction, Side]] = {"yes": "bid", "no": "ask"}
"""The wake's ``direction`` to the order's side; the price is always the YES-side price."""

DEFAULT_CONTRACT_COUNT: Final = 1
"""Contracts per order when the configuration says nothing: the smallest order the market takes."""

PRICE_DECIMALS: Final = 4
"""Decimals of the price string sent with an order (SERVICE.md: ``f"{wire_price:.4f}"``)."""


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
        price: the snapped YES-side price, formatted with ``PRICE_DECIMALS`` decimals.
        count: contracts, from configuration.
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


Dispatcher = Callable[[FireRequest], Awaitable[None]]
"""Places the order a request describes. Exceptions it raises reach the caller of ``fire``."""


async def no_network_dispatcher(request: FireRequest) -> None:
    """The default dispatcher: returns at once and places nothing (the reference benchmark's fake).

    Cancellation: never checkpoints.
    """


class FireOutcome(enum.Enum):
    """How one fire ended."""

    FIRED = "fired"
    REFUSED_PRICE = "refused_price"
    REFUSED_KILL_SWITCH = "refused_kill_switch"


@dataclasses.dataclass(frozen=True, slots=True)
class FireCounters:
    """Outcomes of the fires a ``FirePath`` has handled, by outcome."""

    fired: int
    refused_price: int
    refused_kill_switch: int


class FirePath:
    """The fire path of one executor: refusals, snap, template cache and dispatch.

    Not safe to share between threads; any number of Trio tasks may call ``fire`` concurrently
    (nothing in it awaits before the dispatcher).

    Args:
        dispatcher: places orders; the default places nothing.
        kill_switch: consulted for real fires; None means there is no switch.
        contract_count: contracts per order, at least 1.
    """

    def __init__(
        self,
        *,
        dispatcher: Dispatcher = no_network_dispatcher,
        kill_switch: KillSwitch | None = None,
        contract_count: int = DEFAULT_CONTRACT_COUNT,
    ) -> None:
        if isinstance(contract_count, bool) or contract_count < 1:
            raise ValueError(f"contract_count must be a positive integer, got {contract_count!r}")
        self._dispatcher = dispatcher
        self._kill_switch = kill_switch
        self._contract_count = contract_count
        self._templates: dict[tuple[str, Direction], OrderTemplate] = {}
        self._fired = 0
        self._refused_price = 0
        self._refused_kill_switch = 0

    @property
    def templates_built(self) -> int:
        """How many order templates have been built (one per distinct market and direction)."""
        return len(self._templates)

    def counters(self) -> FireCounters:
        """A snapshot of the outcome counters."""
        return FireCounters(self._fired, self._refused_price, self._refused_kill_switch)

    async def fire(self, message: WakeMessage) -> FireOutcome:
        """Run one accepted wake through the fire path (SERVICE.md, "The fire path").

        ``fired`` is counted before the dispatcher is awaited, so a dispatch that raises or is
        cancelled has still been counted as fired.

        Raises:
            Exception: whatever the dispatcher raises, unchanged; the caller contains it.

        Cancellation: the only checkpoints are the dispatcher's; refusals return without one.
        """
        dry_run = message.dry_run
        price = message.wire_price_yes_dollars
        if not dry_run and not 0.0 < price < 1.0:  # NaN fails the comparison too
            return self._refuse_price(message, "price not strictly between 0 and 1")
        wire_price = _snap_or_nan(price, message.price_ranges)
        if not math.isfinite(wire_price):
            return self._refuse_price(message, "price cannot be snapped to a finite tick")
        if not dry_run and self._kill_switch is not None:
            reason = self._kill_switch.engaged_reason()
            if reason is not None:
                self._refused_kill_switch += 1
                _kill_switch_refusal_warnings.warning(
                    reason=reason,
                    correlation_id=message.correlation_id,
                    market_ticker=message.market_ticker,
                )
                return FireOutcome.REFUSED_KILL_SWITCH
        key = (message.market_ticker, message.direction)
        template = self._templates.get(key)
        if template is None:
            template = OrderTemplate(key[0], key[1], SIDE_FOR_DIRECTION[key[1]])
            self._templates[key] = template
        request = FireRequest(
            template=template,
            price=f"{wire_price:.{PRICE_DECIMALS}f}",
            count=self._contract_count,
            exchange_index=message.exchange_index,
            correlation_id=message.correlation_id,
            correlation_group=message.correlation_group,
            dry_run=dry_run,
        )
        self._fired += 1
        await self._dispatcher(request)
        return FireOutcome.FIRED

    def _refuse_price(self, message: WakeMessage, why: str) -> FireOutcome:
        self._refused_price += 1
        _price_refusal_warnings.warning(
            why=why,
            wire_price_yes_dollars=message.wire_price_yes_dollars,
            dry_run=message.dry_run,
            correlation_id=message.correlation_id,
            market_ticker=message.market_ticker,
        )
        return FireOutcome.REFUSED_PRICE


def _snap_or_nan(price: float, ranges: Sequence[Sequence[float]]) -> float:
    """``snap_to_grid``, or NaN where it cannot produce a number (NaN, infinity, overflow)."""
    try:
        return snap_to_grid(price, ranges)
    except (OverflowError, ValueError):  # round(inf) and round(nan)
        return math.nan
