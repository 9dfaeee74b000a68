"""C3 and C4's order-path figures (docs/performance/plan/2026-12-06.md, fourth pass).

    python fire.py C3/summary.csv [C4/summary.csv ...]

Per invocation, executor and placement: the medians across runs of real `detect_wire` p50 and
p99 (quiet, `fire:real`) and their ratios to the uvloop+aiohttp baseline's in the same invocation
and placement; and `burst:real` p99 over `fire:real` p99 (medians of runs).
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict


def short(executor: str) -> str:
    pinned = "@pinned" if executor.endswith("@pinned") else ""
    for name in ("myc", "py"):
        if f"PYTHONPATH=/tmp/g/{name} " in executor:
            return name + pinned
    return executor


def main() -> None:
    for path in sys.argv[1:]:
        runs: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
        with open(path, encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["span"] != "detect_wire":
                    continue
                for column in ("p50_us", "p99_us"):
                    runs[(short(row["executor"]), row["client"], column, row["run"])].append(
                        float(row[column])
                    )
        median: dict[tuple[str, str, str], float] = {}
        grouped: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for (executor, client, column, _), values in runs.items():
            grouped[(executor, client, column)] += values
        for key, values in grouped.items():
            median[key] = statistics.median(values)
        print(path)
        for placement in ("", "@pinned"):
            base50 = median[("uvloop" + placement, "fire:real", "p50_us")]
            base99 = median[("uvloop" + placement, "fire:real", "p99_us")]
            for name in ("uvloop", "py", "myc"):
                executor = name + placement
                if (executor, "fire:real", "p50_us") not in median:
                    continue
                p50 = median[(executor, "fire:real", "p50_us")]
                p99 = median[(executor, "fire:real", "p99_us")]
                burst = median[(executor, "burst:real", "p99_us")]
                print(
                    f"  {executor:<15} detect_wire p50 {p50:8.1f} ({p50 / base50:.3f}x baseline)"
                    f"  p99 {p99:8.1f} ({p99 / base99:.3f}x)  burst:real p99 {burst:9.1f}"
                    f" ({burst / p99:.2f}x quiet)"
                )


if __name__ == "__main__":
    main()
