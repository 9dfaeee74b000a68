"""Per-run figures of one fire-bench ``summary.csv``, as RESULTS.md 2026-12-02 quotes them.

``python bench/results/2026-12-02-burst/table.py bench/results/2026-12-02-burst/inv1/summary.csv``
prints, per configuration, each run's p50 and p99 of the spans the entry "a real fire in a burst"
uses, their medians over runs, and each run's burst p99 over its quiet p99.
"""

from __future__ import annotations

import csv
import statistics
import sys

VARIANT_PREFIX = "cmd:.venv/bin/python -m bench.experiments.variants "
SPANS = (
    ("burst:real", "detect_wire"),
    ("fire:real", "detect_wire"),
    ("burst:real", "path:transit_read"),
    ("burst:real", "path:handoff"),
    ("fire:real", "dispatch_ack"),
    ("fire:shadow", "detect_fire"),
)

Runs = list[tuple[int, float, float]]


def _short(executor: str) -> str:
    return executor.replace(VARIANT_PREFIX, "").replace(" serve", "")


def _read(path: str) -> dict[tuple[str, str, str], Runs]:
    found: dict[tuple[str, str, str], Runs] = {}
    with open(path, newline="") as rows:
        for row in csv.DictReader(rows):
            key = (_short(row["executor"]), row["client"], row["span"])
            found.setdefault(key, []).append(
                (int(row["run"]), float(row["p50_us"]), float(row["p99_us"]))
            )
    return found


def main(path: str) -> None:
    table = _read(path)
    executors = sorted({executor for executor, _, _ in table})
    for client, span in SPANS:
        print(f"--- {client} {span}: per-run p50 | p99 (µs)")
        for executor in executors:
            runs = sorted(table.get((executor, client, span), []))
            if not runs:
                continue
            p50s = [p50 for _, p50, _ in runs]
            p99s = [p99 for _, _, p99 in runs]
            print(
                f"{executor:32s} p50 {[round(v) for v in p50s]} med {statistics.median(p50s):.0f}"
                f"   p99 {[round(v) for v in p99s]} med {statistics.median(p99s):.0f}"
            )
    print("--- per-run burst p99 over quiet p99")
    for executor in executors:
        burst = {run: p99 for run, _, p99 in table.get((executor, "burst:real", "detect_wire"), [])}
        quiet = {run: p99 for run, _, p99 in table.get((executor, "fire:real", "detect_wire"), [])}
        ratios = [round(burst[run] / quiet[run], 2) for run in sorted(burst) if run in quiet]
        if ratios:
            print(f"{executor:32s} {ratios} med {statistics.median(ratios)}")


if __name__ == "__main__":
    main(sys.argv[1])
