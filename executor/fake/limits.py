"""What the fake exchange says of the account's rate limits, without I/O.

``GET /account/limits`` (``get-account-api-limits.yaml``) and ``GET /account/endpoint_costs``
(``list-non-default-endpoint-costs.yaml``) in the published shapes, from a settable
:class:`FakeApiLimits`: the published Basic tier by default (read 200 tokens/s, write 100/s, each
bucket holding one second; every request 10 tokens, a batch cancel 2 per order, the guide's own
example). A test sets it to see an executor honour other budgets. The fake advertises these
numbers; it does not enforce them (a request over budget is answered, not refused with a 429):
the executor's own buckets are what is under test, and an injected 429 fault stands for the
exchange's refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

DEFAULT_COST: Final = 10
"""The published default token cost of a request."""


def _basic_costs() -> list[tuple[str, str, int]]:
    return [("DELETE", "/portfolio/events/orders/batched", 2)]


@dataclass
class FakeApiLimits:
    """The budgets and costs the fake advertises (settable).

    Attributes:
        usage_tier: the tier's name.
        read_refill / read_capacity: the read bucket (tokens/s, tokens).
        write_refill / write_capacity: the write bucket.
        default_cost: tokens of a request not listed in ``endpoint_costs``.
        endpoint_costs: ``(METHOD, path, cost)`` of the endpoints that differ, paths as the
            published operations spell them (without ``/trade-api/v2``).
    """

    usage_tier: str = "basic"
    read_refill: int = 200
    read_capacity: int = 200
    write_refill: int = 100
    write_capacity: int = 100
    default_cost: int = DEFAULT_COST
    endpoint_costs: list[tuple[str, str, int]] = field(default_factory=_basic_costs)

    def limits_answer(self) -> dict[str, Any]:
        """The published ``GetAccountApiLimitsResponse``."""
        return {
            "usage_tier": self.usage_tier,
            "read": {"refill_rate": self.read_refill, "bucket_capacity": self.read_capacity},
            "write": {"refill_rate": self.write_refill, "bucket_capacity": self.write_capacity},
            "grants": [],
        }

    def costs_answer(self) -> dict[str, Any]:
        """The published ``GetAccountEndpointCostsResponse``."""
        return {
            "default_cost": self.default_cost,
            "endpoint_costs": [
                {"method": method, "path": path, "cost": cost}
                for method, path, cost in self.endpoint_costs
            ],
        }


__all__ = ["DEFAULT_COST", "FakeApiLimits"]
