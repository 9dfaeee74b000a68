"""rows/s (and acked/s, drops) of each executor over the first one's, paired by run and placement,
from a ``--saturation`` run's ``saturation.csv`` (2026-12-06 second pass, issue 34).

  sat_ratio.py SATURATION_CSV [LABEL=PREFIX ...]

An executor's name ends in ``@pinned`` when pinned. LABEL=PREFIX names the executors whose name
(without the placement) starts with PREFIX; the first executor of the file is the reference.
"""

import csv
import statistics
import sys
from collections import defaultdict


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    labels = [arg.split("=", 1) for arg in sys.argv[2:]]

    def label(name):
        base = name.removesuffix("@pinned")
        for lab, prefix in labels:
            if base == prefix or base.startswith(prefix):
                return lab
        return base

    ref_name = rows[0]["executor"].removesuffix("@pinned")
    by = defaultdict(dict)
    for r in rows:
        placement = "pinned" if r["executor"].endswith("@pinned") else "unpinned"
        by[(r["load"], placement, label(r["executor"]))][int(r["run"])] = r
    ref = label(ref_name)
    print("| load | placement | executor | rows/s per run | rows/s over main, per run | median | acked/s over main (median) | drops (3 runs) |")
    print("|---|---|---|---|---|---|---|---|")
    for (load, placement, name), runs in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1] != "unpinned", kv[0][2] != ref, kv[0][2])):
        base = by[(load, placement, ref)]
        ratios = [float(runs[k]["rows_per_s"]) / float(base[k]["rows_per_s"]) for k in sorted(runs)]
        acked = [float(runs[k]["accepted_per_s"]) / float(base[k]["accepted_per_s"]) for k in sorted(runs)]
        values = ", ".join(f"{float(runs[k]['rows_per_s']):,.0f}" for k in sorted(runs))
        drops = sum(int(runs[k]["drops"]) for k in runs)
        print(
            f"| {load} | {placement} | {name} | {values} | {', '.join(f'{x:.2f}' for x in ratios)} |"
            f" {statistics.median(ratios):.2f} | {statistics.median(acked):.2f} | {drops:,} |"
        )


if __name__ == "__main__":
    main()
