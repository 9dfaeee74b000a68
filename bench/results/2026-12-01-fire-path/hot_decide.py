"""Hot and cold cost of a real fire's decision and its audit stretch, outside the executor.

Run from the repository root:
``PYTHONPATH=. .venv/bin/python bench/results/2026-12-01-fire-path/hot_decide.py``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

from executor.decide.decision import Decider, Order, OrderRules
from executor.decide.risk import RiskGate, RiskLimits
from executor.config.sizing import SizingConfig
from executor.exchange.follow.account import AccountState
from executor.exchange.orders.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.orders.rows import order_row
from executor.recording.rows import OrderRowKind
from tests.support.inprocess import make_wake

NO_LIMIT = 10**9
LIMITS = dataclasses.replace(
    RiskLimits(),
    **{
        field.name: NO_LIMIT
        for field in dataclasses.fields(RiskLimits)
        if field.name.startswith("max_")
    },
    refire_cooldown_s=0,
)
POLICY = OrderPolicy()
RISK = RiskGate(LIMITS, frozenset({0}))
DECIDER = Decider(rules=OrderRules(SizingConfig(), AccountState(), RISK, POLICY.permission))
DISPATCHER = OrderDispatcher.__new__(OrderDispatcher)
DISPATCHER.policy = POLICY
WAKE = make_wake("c", exchange_index=0)


def audit(order: Order) -> None:
    """What begin() does between the decision and the body: attempt, ids, pending row."""
    assert order.ticket is not None
    order.ticket.sending()
    prepared = DISPATCHER.prepare(order.request)
    order_row(prepared, POLICY, OrderRowKind.PENDING, 0)
    order.ticket.finished()


def timed(rounds: int, *, cold: bool) -> tuple[float, float]:
    decide, audited = [], []
    for _ in range(rounds):
        if cold:
            time.sleep(0.05)
            scratch = [bytearray(1 << 20) for _ in range(8)]
            del scratch
        start = time.perf_counter_ns()
        order = DECIDER.decide(WAKE)
        middle = time.perf_counter_ns()
        assert isinstance(order, Order)
        audit(order)
        decide.append(middle - start)
        audited.append(time.perf_counter_ns() - middle)
    return statistics.median(decide) / 1000, statistics.median(audited) / 1000


def main() -> None:
    timed(500, cold=False)
    print("hot:  decide p50 {:.1f} us, audit p50 {:.1f} us".format(*timed(3000, cold=False)))
    print("cold: decide p50 {:.1f} us, audit p50 {:.1f} us".format(*timed(60, cold=True)))


if __name__ == "__main__":
    main()
