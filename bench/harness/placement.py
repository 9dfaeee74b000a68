"""Placement as a benchmark configuration: every executor unpinned and pinned, in one invocation.

``unpinned``: the scheduler places every process, as before. ``pinned``: the executor process runs
on ``EXECUTOR_CPU`` only and every client process on ``CLIENT_CPU`` only, set in each child before
it ``exec``s (what ``taskset -c`` does), so every thread and process they start inherits it. The
same for every executor (the C++ port has no ``--cpu`` flag); ``executor serve --cpu`` is measured
as its own ``cmd:`` executor. A pinned configuration's executor name carries ``PINNED_SUFFIX``, so
``summary.csv`` and friends keep their columns (docs/performance/plan/, addendum 2026-12-01).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Final

from bench.harness.processes import BenchError, ExecutorSpec

PLACEMENTS: Final = ("unpinned", "pinned")
EXECUTOR_CPU: Final = 1
"""The executor's CPU when pinned; CPU 0 takes interrupts and the rest of the machine more often."""
CLIENT_CPU: Final = 0
PINNED_SUFFIX: Final = "@pinned"


def default_placements() -> list[str]:
    """Both placements where CPUs 0 and 1 are allowed; only ``unpinned`` elsewhere."""
    if {EXECUTOR_CPU, CLIENT_CPU} <= os.sched_getaffinity(0):
        return list(PLACEMENTS)
    return ["unpinned"]


def placed(spec: ExecutorSpec, placement: str) -> ExecutorSpec:
    """``spec`` under ``placement`` (``unpinned`` returns it unchanged).

    Raises:
        BenchError: an unknown placement, or a machine without both CPUs.
    """
    if placement == "unpinned":
        return spec
    if placement != "pinned":
        raise BenchError(f"unknown placement {placement!r} ({', '.join(PLACEMENTS)})")
    allowed = os.sched_getaffinity(0)
    if not {EXECUTOR_CPU, CLIENT_CPU} <= allowed:
        raise BenchError(f"pinned needs CPUs {CLIENT_CPU} and {EXECUTOR_CPU}; allowed {allowed}")
    return dataclasses.replace(
        spec,
        name=spec.name + PINNED_SUFFIX,
        cpus=frozenset({EXECUTOR_CPU}),
        client_cpus=frozenset({CLIENT_CPU}),
    )


def placed_all(specs: Sequence[ExecutorSpec], placements: Sequence[str]) -> list[ExecutorSpec]:
    """Every executor under every placement, placements outermost (so runs interleave them)."""
    return [placed(spec, placement) for placement in placements for spec in specs]


def trio_reference(executor: str) -> str:
    """The ``trio`` configuration an executor's ratios are taken against: same placement."""
    return "trio" + PINNED_SUFFIX if executor.endswith(PINNED_SUFFIX) else "trio"
