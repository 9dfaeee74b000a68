"""The reference burst's wake_send and wake_recv per executor, client and placement: p50 and p99,
median [min/max] over runs, from a burst run's ``summary.csv`` (2026-12-06 second pass, issue 34).

  wake_send.py SUMMARY_CSV [LABEL=PREFIX ...]
"""

import csv
import statistics
import sys
from collections import defaultdict


def main():
    labels = [arg.split("=", 1) for arg in sys.argv[2:]]

    def label(name):
        base = name.removesuffix("@pinned")
        for lab, prefix in labels:
            if base == prefix or base.startswith(prefix):
                return lab
        return base

    cells = defaultdict(list)
    for r in csv.DictReader(open(sys.argv[1])):
        if not r["client"].startswith("reference-"):
            continue
        placement = "pinned" if r["executor"].endswith("@pinned") else "unpinned"
        key = (r["client"].removeprefix("reference-"), placement, label(r["executor"]), r["span"])
        cells[key].append((float(r["p50_us"]), float(r["p99_us"])))

    def fmt(values):
        return f"{statistics.median(values):,.1f} [{min(values):,.1f}/{max(values):,.1f}]"

    print("| poller | placement | executor | span | p50 µs median [min/max] | p99 µs median [min/max] |")
    print("|---|---|---|---|---|---|")
    for (client, placement, name, span), runs in sorted(cells.items(), key=lambda kv: (kv[0][3], kv[0][0], kv[0][1] != "unpinned", kv[0][2])):
        print(f"| {client} | {placement} | {name} | {span} | {fmt([a for a, _ in runs])} | {fmt([b for _, b in runs])} |")


if __name__ == "__main__":
    main()
