"""Medians over runs of each run's percentile from a fire summary.csv, and trio's ratio to each
other executor within one placement (the harness's printed ratio lines divide trio unpinned by
every other executor, pinned ones included); the burst's p99 over the quiet p99 per executor.

  fire_ratios.py SUMMARY_CSV
"""

import csv
import statistics
import sys
from collections import defaultdict

FIGURES = (
    ("fire:real", "detect_wire", "p50_us"),
    ("fire:real", "detect_wire", "p99_us"),
    ("fire:real", "dispatch_ack", "p50_us"),
    ("fire:shadow", "detect_fire", "p50_us"),
    ("burst:real", "detect_wire", "p50_us"),
    ("burst:real", "detect_wire", "p99_us"),
)

with open(sys.argv[1], newline="") as handle:
    rows = list(csv.DictReader(handle))
values: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
by_run: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
for row in rows:
    for client, span, column in FIGURES:
        if (row["client"], row["span"]) == (client, span):
            values[(row["executor"], client, span, column)].append(float(row[column]))
            by_run[(row["executor"], row["run"])][f"{client} {column}"] = float(row[column])
executors = sorted({key[0] for key in values})
for placement in ("unpinned", "pinned"):
    here = [name for name in executors if name.endswith("@pinned") == (placement == "pinned")]
    trio = "trio@pinned" if placement == "pinned" else "trio"
    for client, span, column in FIGURES:
        medians = {name: statistics.median(values[(name, client, span, column)]) for name in here}
        ratios = "  ".join(
            f"/{name.removesuffix('@pinned')} {medians[trio] / medians[name]:.3f}x"
            for name in here
            if name != trio
        )
        shown = "  ".join(f"{name.removesuffix('@pinned')} {medians[name]:.0f}" for name in here)
        print(f"{placement:8} {client:11} {span:12} {column[:3]}: {shown}   trio{ratios}")
    for name in here:
        burst_over_quiet = [
            run["burst:real p99_us"] / run["fire:real p99_us"]
            for (executor, _), run in sorted(by_run.items())
            if executor == name
        ]
        print(
            f"{placement:8} {name}: burst p99 / quiet p99 per run "
            + ", ".join(f"{ratio:.2f}x" for ratio in burst_over_quiet)
            + f" (median {statistics.median(burst_over_quiet):.2f}x)"
        )
