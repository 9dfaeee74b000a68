"""A real fire's decision timed hot and after the process slept (BENCHMARK.md H8).

The decision is the executor's own (``Decider.decide`` on a real wake, the risk gate on with the
fire bench's limits: nothing refused, the arithmetic still run). Each sample sleeps, optionally
runs something first, then times one decision; the median of the samples is printed per case.
The process runs on CPU 1 (as the pinned executor does). Run from the repository root:
``PYTHONPATH=. .venv/bin/python bench/results/2026-12-04-warm/decide_decay.py``.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable

from executor.decide.decision import Decider, Order, OrderRules
from executor.decide.risk import RiskGate, RiskLimits
from executor.config.sizing import SizingConfig
from executor.exchange.follow.account import AccountState
from executor.exchange.orders.dispatcher import OrderPolicy
from tests.support.inprocess import make_wake

LIMITS = dataclasses.replace(
    RiskLimits(),
    **{f.name: 10**9 for f in dataclasses.fields(RiskLimits) if f.name.startswith("max_")},
    refire_cooldown_s=0,
)
RISK = RiskGate(LIMITS, frozenset({0}))
DECIDER = Decider(rules=OrderRules(SizingConfig(), AccountState(), RISK, OrderPolicy().permission))
WAKE = make_wake("decay", exchange_index=0)


def decide_once() -> int:
    """One decision, its attempt recorded and finished as a sent order's would be (ns)."""
    start = time.perf_counter_ns()
    order = DECIDER.decide(WAKE)
    elapsed = time.perf_counter_ns() - start
    assert isinstance(order, Order) and order.ticket is not None
    order.ticket.sending()
    order.ticket.finished()
    return elapsed


def spin(microseconds: int) -> None:
    """Busy for ``microseconds`` running nothing of the decision."""
    end = time.perf_counter_ns() + microseconds * 1000
    while time.perf_counter_ns() < end:
        pass


def median_us(samples: int, sleep_s: float, before: Callable[[], object] = lambda: None) -> float:
    """Median of ``samples`` decisions, each after ``sleep_s`` asleep and ``before()``."""
    timed = []
    for _ in range(samples):
        time.sleep(sleep_s)
        before()
        timed.append(decide_once())
    return round(statistics.median(timed) / 1000, 1)


def main() -> None:
    os.sched_setaffinity(0, {1})
    for _ in range(300):
        decide_once()
    print("hot (no sleep):", median_us(3000, 0.0), "us")
    for sleep_ms in (0.2, 1, 2, 5, 10, 20, 50, 150):
        samples = 40 if sleep_ms >= 50 else 200
        print(f"after {sleep_ms} ms asleep:", median_us(samples, sleep_ms / 1000), "us")
    print("after 150 ms asleep, 1 ms spun first:", median_us(40, 0.15, lambda: spin(1000)), "us")
    print("after 150 ms asleep, one decision first:", median_us(40, 0.15, decide_once), "us")


if __name__ == "__main__":
    main()
