"""What a fire-path run prints: its comparisons, as lines beside the percentile table.

From the ``Series`` and ``FireRunFacts`` of ``bench.scenarios.fire``: trio's median percentiles
over each other executor's (``detect_wire``, the derived ``wire_ack``, ``detect_fire``), each
executor's burst over quiet p99, the sign's share of ``detect_fire``, and how many burst shadow
fires were signed rather than skipped. Ratios within one invocation, so the machine's load cancels
out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from bench.harness.placement import trio_reference
from bench.harness.runner import Series
from bench.reports.stats import percentile
from bench.scenarios.fire import KINDS, WIRE_ACK, FireRunFacts


def _median_percentile(items: Sequence[Series], p: float) -> float:
    return statistics.median(percentile(item.samples_us, p) for item in items)


def _trio_ratio_lines(
    by_key: Mapping[tuple[str, str, str], list[Series]],
    executors: Sequence[str],
    span: str,
    kinds: Sequence[str],
    *,
    percentiles: Sequence[float] = (0.5, 0.99),
    derived: bool = False,
) -> list[str]:
    """Trio's median percentile of ``span`` over each other executor's in the same placement
    (``trio@pinned`` for a pinned one: ``bench.harness.placement.trio_reference``), per kind."""
    note = " (derived per fire: dispatch_ack - dispatch_wire)" if derived else ""
    lines = [
        f"fire path: {span} median over the other executor's, trio / other, same placement{note}:"
    ]
    for kind in kinds:
        for executor in executors:
            trio = trio_reference(executor)
            reference = by_key.get((trio, kind, span))
            mine = by_key.get((executor, kind, span))
            if executor == trio or not mine or not reference:
                continue
            for p in percentiles:
                ratio = _median_percentile(reference, p) / _median_percentile(mine, p)
                label = f"p{round(p * 100)}"
                lines.append(f"  {trio} / {executor}  {kind:<12} {span} {label}: {ratio:.3f}x")
    return lines


def _burst_over_quiet_lines(
    by_key: Mapping[tuple[str, str, str], list[Series]], executors: Sequence[str], span: str
) -> list[str]:
    """Per executor, ``burst:real`` p99 of ``span`` over its ``fire:real`` p99."""
    lines = [f"fire path: burst:real over fire:real {span} p99 (median of runs; pooled):"]
    for executor in executors:
        burst = by_key.get((executor, "burst:real", span))
        quiet = by_key.get((executor, "fire:real", span))
        if not burst or not quiet:
            continue
        median_ratio = _median_percentile(burst, 0.99) / _median_percentile(quiet, 0.99)
        pooled_burst = percentile([v for s in burst for v in s.samples_us], 0.99)
        pooled_quiet = percentile([v for s in quiet for v in s.samples_us], 0.99)
        lines.append(
            f"  {executor:>10}: {median_ratio:.2f}x (median of runs);"
            f" pooled {pooled_burst:.1f} / {pooled_quiet:.1f} us"
            f" = {pooled_burst / pooled_quiet:.2f}x"
        )
    return lines


def fire_lines(series: Sequence[Series], facts: Sequence[FireRunFacts]) -> list[str]:
    """The fire path's comparisons: detect_fire ratios to trio, burst over quiet, sign's share."""
    by_key: dict[tuple[str, str, str], list[Series]] = {}
    for item in series:
        by_key.setdefault((item.executor, item.client, item.span), []).append(item)
    executors = sorted({item.executor for item in series})
    lines = _trio_ratio_lines(by_key, executors, "detect_wire", ("fire:real", "burst:real"))
    lines += _trio_ratio_lines(
        by_key, executors, WIRE_ACK, ("fire:real",), percentiles=(0.5,), derived=True
    )
    lines += _trio_ratio_lines(by_key, executors, "detect_fire", KINDS, percentiles=(0.5,))
    for span in ("detect_wire", "detect_fire"):
        lines += _burst_over_quiet_lines(by_key, executors, span)
    lines.append("fire path: sign p50 as a share of detect_fire p50 (medians of runs):")
    for executor in executors:
        for kind in ("fire:shadow", "fire:real"):
            sign = by_key.get((executor, kind, "sign"))
            detect = by_key.get((executor, kind, "detect_fire"))
            if sign and detect:
                share = _median_percentile(sign, 0.5) / _median_percentile(detect, 0.5)
                lines.append(f"  {executor:>10} {kind:<12} {share:.0%}")
    for executor in executors:
        runs_of = [fact for fact in facts if fact.executor == executor]
        sent = sum(fact.burst_shadows_sent for fact in runs_of)
        signed = sum(fact.burst_shadows_signed for fact in runs_of)
        lines.append(
            f"  {executor:>10}: burst shadow fires signed {signed} of {sent}"
            f" (skipped before signing: {sent - signed})"
        )
    return lines
