"""Rate limits as Kalshi counts them: a read and a write token bucket, and what each call costs.

Kalshi meters every authenticated request in tokens (``getting_started/rate_limits``): ``GET``
requests draw on a **read** bucket, order placement, cancels and order groups on a **write**
bucket; each bucket refills at the tier's budget per second up to its capacity; a request costs
``default_cost`` (10) unless ``GET /account/endpoint_costs`` lists it, and a batch costs its
per-item cost once per item. :func:`load_rate_limits` reads the account's buckets from
``GET /account/limits`` and the costs from ``GET /account/endpoint_costs`` at start-up; when
either cannot be read it falls back to the published Basic tier, with a warning.

:class:`RateLimits` holds the two buckets. A real order takes its tokens with the write bucket's
own ``acquire`` (FIFO among orders, before signing: DISPATCH.md §5); everything else takes them
through :meth:`RateLimits.take`, which for a write queues behind every waiting order
(``TokenBucket.acquire_behind``), and for a read uses the read bucket, which no order touches. So
a real order never waits behind a lookup, a cancel or a group call.

Deliberately conservative: Kalshi gives each exchange shard (``exchange_index >= 1``) its own
write bucket for single orders; here every write draws on the one unscoped bucket, which never
lets any shard's bucket be overdrawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from executor.exchange.messages import (
    API_PREFIX,
    BATCH_CANCEL_PATH,
    ENDPOINT_COSTS_PATH,
    LIMITS_PATH,
    ORDER_PATH,
    ExchangeError,
)
from executor.exchange.protocols import SignedReader
from executor.exchange.token_bucket import TokenBucket

log = structlog.get_logger()

DEFAULT_COST: Final = 10
"""Tokens a request costs unless the exchange lists it otherwise (the published default)."""

BASIC_BATCH_CANCEL_COST: Final = 2
"""Tokens per order of a batch cancel (the rate-limit guide's own example: 25 cancels, 50)."""


@dataclass(frozen=True, slots=True)
class BucketLimit:
    """One bucket's budget: ``refill_per_s`` tokens a second, at most ``capacity`` held."""

    refill_per_s: int
    capacity: int


@dataclass(frozen=True, slots=True)
class ApiLimits:
    """The account's rate limits: its tier, its two buckets and the endpoints' costs.

    Attributes:
        usage_tier: the tier's name as the exchange gives it.
        read / write: the two buckets' budgets.
        default_cost: tokens of a request not in ``costs``.
        costs: ``(METHOD, path without /trade-api/v2)`` -> tokens; a path may hold ``{name}``
            segments, which match any one segment.
        source: ``exchange`` (read at start-up) or ``fallback`` (the published Basic tier).
    """

    usage_tier: str
    read: BucketLimit
    write: BucketLimit
    default_cost: int = DEFAULT_COST
    costs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    source: str = "exchange"

    def cost(self, method: str, path: str) -> int:
        """Tokens one ``method path`` request (or one item of a batch) costs."""
        method, path = method.upper(), _unprefixed(path)
        exact = self.costs.get((method, path))
        if exact is not None:
            return exact
        for (listed_method, template), cost in self.costs.items():
            if listed_method == method and _matches(template, path):
                return cost
        return self.default_cost


BASIC_TIER: Final = ApiLimits(
    usage_tier="basic",
    read=BucketLimit(200, 200),
    write=BucketLimit(100, 100),
    costs={("DELETE", "/portfolio/events/orders/batched"): BASIC_BATCH_CANCEL_COST},
    source="fallback",
)
"""The published Basic tier (read 200/s, write 100/s, each holding one second) and the costs the
guide publishes: what the executor assumes when the exchange does not say."""


def _unprefixed(path: str) -> str:
    path = path.split("?", 1)[0]
    return path.removeprefix(API_PREFIX) or "/"


def _matches(template: str, path: str) -> bool:
    wanted, parts = template.split("/"), path.split("/")
    if len(wanted) != len(parts):
        return False
    return all(
        (pattern.startswith("{") and pattern.endswith("}") and part) or pattern == part
        for pattern, part in zip(wanted, parts, strict=True)
    )


def is_write(method: str) -> bool:
    """Whether a request draws on the write bucket: every method but ``GET`` (orders, cancels,
    order groups); reads are ``GET`` and "anything not routed to Write"."""
    return method.upper() != "GET"


def _bucket(payload: object, name: str) -> BucketLimit:
    if not isinstance(payload, dict):
        raise ExchangeError(f"account limits: {name} is not an object: {payload!r:.100}")
    refill, capacity = payload.get("refill_rate"), payload.get("bucket_capacity")
    for value in (refill, capacity):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ExchangeError(f"account limits: {name} has no positive integer budget")
    assert isinstance(refill, int) and isinstance(capacity, int)
    return BucketLimit(refill, capacity)


def parse_limits(payload: Mapping[str, Any]) -> tuple[str, BucketLimit, BucketLimit]:
    """(tier, read, write) of a ``GetAccountApiLimitsResponse``.

    Raises:
        ExchangeError: a bucket is missing or not a positive integer budget.
    """
    tier = payload.get("usage_tier")
    return (
        tier if isinstance(tier, str) else "unknown",
        _bucket(payload.get("read"), "read"),
        _bucket(payload.get("write"), "write"),
    )


def parse_costs(payload: Mapping[str, Any]) -> tuple[int, dict[tuple[str, str], int]]:
    """(default cost, listed costs) of a ``GetAccountEndpointCostsResponse``.

    Raises:
        ExchangeError: the default or an entry is malformed.
    """
    default = payload.get("default_cost")
    entries = payload.get("endpoint_costs")
    if not isinstance(default, int) or isinstance(default, bool) or default <= 0:
        raise ExchangeError(f"endpoint costs: default_cost {default!r:.50} is not positive")
    if not isinstance(entries, list):
        raise ExchangeError("endpoint costs: endpoint_costs is not a list")
    costs: dict[tuple[str, str], int] = {}
    for entry in entries:
        method = entry.get("method") if isinstance(entry, dict) else None
        path = entry.get("path") if isinstance(entry, dict) else None
        cost = entry.get("cost") if isinstance(entry, dict) else None
        valid_cost = isinstance(cost, int) and not isinstance(cost, bool) and cost >= 0
        if not (isinstance(method, str) and isinstance(path, str) and valid_cost):
            raise ExchangeError(f"endpoint costs: malformed entry {entry!r:.200}")
        assert isinstance(cost, int)
        costs[(method.upper(), _unprefixed(path))] = cost
    return default, costs


class RateLimits:
    """The read and write buckets of one account, and what each request costs.

    Args:
        limits: the budgets and costs (the published Basic tier by default).
        write: a write bucket to use instead of one made from ``limits`` (tests, the benchmark).
    """

    def __init__(self, limits: ApiLimits = BASIC_TIER, *, write: TokenBucket | None = None) -> None:
        self.limits = limits
        self.read = TokenBucket(limits.read.capacity, limits.read.refill_per_s)
        self.write = write or TokenBucket(limits.write.capacity, limits.write.refill_per_s)
        self.order_tokens = float(min(limits.cost("POST", ORDER_PATH), self.write.capacity))
        """Tokens one order attempt takes (10 unless the exchange says otherwise)."""

    def bucket(self, method: str) -> TokenBucket:
        """The bucket a ``method`` request draws on."""
        return self.write if is_write(method) else self.read

    def items_per_batch(self, method: str, path: str, most: int) -> int:
        """Most items of one batch whose whole cost fits the bucket at once (at least one)."""
        per_item = self.limits.cost(method, path)
        if per_item <= 0:
            return most
        return max(1, min(most, int(self.bucket(method).capacity // per_item)))

    async def take(self, method: str, path: str, items: int = 1) -> None:
        """Take the tokens of one request of ``items`` items (not an order's: see the module).

        A write queues behind every waiting order. A cost beyond the bucket's capacity (an
        exchange that lists one) is capped at the capacity, which the exchange would refuse too.

        Cancellation: a cancelled wait takes nothing.
        """
        bucket = self.bucket(method)
        tokens = min(float(self.limits.cost(method, path) * max(items, 1)), bucket.capacity)
        if tokens <= 0:
            return
        if bucket is self.write:
            await bucket.acquire_behind(tokens)
        else:
            await bucket.acquire(tokens)


async def fetch_api_limits(reader: SignedReader) -> ApiLimits:
    """The account's limits from ``GET /account/limits`` and ``GET /account/endpoint_costs``,
    or the published Basic tier (one warning saying why) when either cannot be read."""
    try:
        tier, read, write = parse_limits(await reader.get_json(LIMITS_PATH))
        default, costs = parse_costs(await reader.get_json(ENDPOINT_COSTS_PATH))
    except ExchangeError as error:
        log.warning(
            "rate limits unknown: assuming the published Basic tier",
            error=str(error),
            read_per_s=BASIC_TIER.read.refill_per_s,
            write_per_s=BASIC_TIER.write.refill_per_s,
        )
        return BASIC_TIER
    limits = ApiLimits(tier, read, write, default, costs)
    log.info(
        "rate limits read from the exchange",
        usage_tier=tier,
        read_per_s=read.refill_per_s,
        read_capacity=read.capacity,
        write_per_s=write.refill_per_s,
        write_capacity=write.capacity,
        order_cost=limits.cost("POST", ORDER_PATH),
        batch_cancel_cost=limits.cost("DELETE", BATCH_CANCEL_PATH),
    )
    return limits


__all__ = [
    "BASIC_BATCH_CANCEL_COST",
    "BASIC_TIER",
    "DEFAULT_COST",
    "ApiLimits",
    "BucketLimit",
    "RateLimits",
    "fetch_api_limits",
    "is_write",
    "parse_costs",
    "parse_limits",
]
