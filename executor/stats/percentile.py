"""Percentiles exactly as the reference harness computes them (type 7, BENCH.md).

One definition for the whole project: the benchmark (``bench.reports.stats`` re-exports it) and
``executor stats`` both use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """The type-7 (linear interpolation) percentile of ``values`` for ``p`` in [0, 1].

    Written in the reference harness's exact form: an algebraically equal formula rounds
    differently, and ``golden/percentiles.tsv`` pins the bits.

    Raises:
        ValueError: ``values`` is empty or ``p`` is outside [0, 1].
    """
    return percentile_of_sorted(sorted(values), p)


def percentile_of_sorted(ordered: Sequence[float], p: float) -> float:
    """:func:`percentile` of values already in ascending order (skips the sort; same bits).

    For many percentiles of one large sample: sort once, ask many times.

    Raises:
        ValueError: ``ordered`` is empty or ``p`` is outside [0, 1].
    """
    if not ordered:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"percentile rank {p!r} is outside [0, 1]")
    n = len(ordered)
    if n == 1:
        return ordered[0]
    rank = (n - 1) * p
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return ordered[int(rank)]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)
