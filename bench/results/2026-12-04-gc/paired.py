"""Per-run ratios of one connection flat out from a saturation.csv: trio over each other
executor, rows/s and acked frames/s, paired by run and placement (PYTHONPATH not needed).

  paired.py SATURATION_CSV
"""

import csv
import statistics
import sys
from collections import defaultdict

with open(sys.argv[1], newline="") as handle:
    rows = [row for row in csv.DictReader(handle) if row["load"] == "one-flat-out"]
by_run: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
for row in rows:
    name = row["executor"]
    placement = "pinned" if name.endswith("@pinned") else "unpinned"
    by_run[(placement, row["run"])][name.removesuffix("@pinned")] = (
        float(row["rows_per_s"]),
        float(row["accepted_per_s"]),
    )
for placement in ("unpinned", "pinned"):
    ratios: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (where, _run), results in sorted(by_run.items()):
        if where != placement:
            continue
        trio_rows, trio_acked = results["trio"]
        for name, (other_rows, other_acked) in results.items():
            if name != "trio":
                ratios[name].append((trio_rows / other_rows, trio_acked / other_acked))
    for name, pairs in ratios.items():
        rows_ratios = [pair[0] for pair in pairs]
        acked_ratios = [pair[1] for pair in pairs]
        print(
            f"{placement:8} trio / {name}: rows/s {statistics.median(rows_ratios):.2f}"
            f" [{min(rows_ratios):.2f}-{max(rows_ratios):.2f}]"
            f"  acked/s {statistics.median(acked_ratios):.2f}"
            f" [{min(acked_ratios):.2f}-{max(acked_ratios):.2f}]"
        )
