"""The path breakdown's table: where a real order's ``detect_wire`` goes, per executor and kind.

From the ``path:<segment>`` series of ``bench.scenarios.fire``: for each segment, the median over
runs of its p50, and its mean over every kept fire of every run. The means of one executor and
kind add up to the mean ``detect_wire`` of the same fires (their p50s need not add up to a p50),
which the table's last line shows beside the ``detect_wire`` row's own mean.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.harness.runner import Series
from bench.reports.stats import percentile
from bench.scenarios.fire_path import SEGMENT_PREFIX, SEGMENTS

BREAKDOWN_KINDS = ("fire:real", "burst:real")
"""The kinds whose fires reach the wire (shadow fires stop before it)."""


def _pooled(items: Sequence[Series]) -> list[float]:
    return [value for item in items for value in item.samples_us]


def breakdown_lines(series: Sequence[Series]) -> list[str]:
    """One block per executor and kind with segments: ``segment  p50  mean`` in µs."""
    by_key: dict[tuple[str, str, str], list[Series]] = {}
    for item in series:
        by_key.setdefault((item.executor, item.client, item.span), []).append(item)
    executors = sorted({item.executor for item in series})
    lines = [
        "fire path: where detect_wire goes (us; p50 = median of runs' p50s, mean = all kept fires;"
        " the means add up to detect_wire's):"
    ]
    for kind in BREAKDOWN_KINDS:
        for executor in executors:
            first = by_key.get((executor, kind, SEGMENT_PREFIX + SEGMENTS[0][0]))
            if not first:
                continue
            lines.append(f"  {executor} {kind} ({len(_pooled(first))} fires):")
            total = 0.0
            for segment, _ in SEGMENTS:
                items = by_key.get((executor, kind, SEGMENT_PREFIX + segment), [])
                pooled = _pooled(items)
                p50 = statistics.median(percentile(item.samples_us, 0.5) for item in items)
                mean = statistics.fmean(pooled)
                total += mean
                lines.append(f"    {segment:<14} p50 {p50:9.1f}  mean {mean:9.1f}")
            wire = by_key.get((executor, kind, "detect_wire"), [])
            if wire:
                wire_p50 = statistics.median(percentile(item.samples_us, 0.5) for item in wire)
                lines.append(
                    f"    {'sum of means':<14} {total:9.1f};  detect_wire p50 {wire_p50:9.1f}"
                    f"  mean {statistics.fmean(_pooled(wire)):9.1f}"
                )
    return lines


__all__ = ["BREAKDOWN_KINDS", "breakdown_lines"]
