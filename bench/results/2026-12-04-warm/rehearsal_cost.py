"""What one ``--keep-warm`` rehearsal costs the event loop (the work a wake may wait behind).

The executor's own rehearsal (``KeepWarm.rehearse``) of a real wake on a fire path with an
exchange stand-in (``tests.support.order_fakes``: the dispatcher, the risk gate and the rows are the
executor's, the transport a fake), after one real fire; timed back to back and after sleeping the
2 ms interval the bench used, on CPU 1. Run from the repository root:
``PYTHONPATH=. .venv/bin/python bench/results/2026-12-04-warm/rehearsal_cost.py``.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

import trio

from executor.decide.risk import RiskGate, RiskLimits
from executor.fire.keep_warm import KeepWarm
from tests.support.inprocess import make_wake
from tests.support.order_fakes import StartingPlacer, order_harness

LIMITS = dataclasses.replace(
    RiskLimits(),
    **{f.name: 10**9 for f in dataclasses.fields(RiskLimits) if f.name.startswith("max_")},
    refire_cooldown_s=0,
)


async def measure() -> None:
    wake = make_wake("cost", exchange_index=0)
    async with order_harness(placer=StartingPlacer([]), risk=RiskGate(LIMITS, frozenset({0}))) as h:
        await h.fire_path.fire(wake)
        keep_warm = KeepWarm(0.002)
        for gap_s, samples in ((0.0, 3000), (0.002, 1000)):
            timed = []
            for _ in range(samples):
                if gap_s:
                    await trio.sleep(gap_s)
                start = time.perf_counter_ns()
                keep_warm.rehearse(h.fire_path, wake)
                timed.append(time.perf_counter_ns() - start)
            timed.sort()
            p50, p99 = statistics.median(timed) / 1000, timed[int(0.99 * len(timed))] / 1000
            print(f"rehearsal after {gap_s * 1000:g} ms: p50 {p50:.1f} us, p99 {p99:.1f} us")
        assert not keep_warm.failed


def main() -> None:
    os.sched_setaffinity(0, {1})
    trio.run(measure)


if __name__ == "__main__":
    main()
