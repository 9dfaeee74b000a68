"""Per-run rows/s ratios of one-flat-out from a saturation.csv: trio, floor, the C++ port."""
import csv
import statistics
import sys
from collections import defaultdict

with open(sys.argv[1], newline="") as handle:
    rows = list(csv.DictReader(handle))
by = defaultdict(dict)
for r in rows:
    if r["load"] != "one-flat-out":
        continue
    name = r["executor"]
    placement = "pinned" if name.endswith("@pinned") else "unpinned"
    base = name.removesuffix("@pinned")
    kind = "trio" if base == "trio" else "floor" if "floor" in base else "cpp"
    by[(placement, r["run"])][kind] = (
        float(r["rows_per_s"]),
        float(r["accepted_per_s"]),
        int(r["drops"]),
    )
for placement in ("unpinned", "pinned"):
    ratios = defaultdict(list)
    for (p, run), d in sorted(by.items()):
        if p != placement:
            continue
        t, f, c = d["trio"][0], d["floor"][0], d["cpp"][0]
        ratios["trio/cpp"].append(t / c)
        ratios["floor/cpp"].append(f / c)
        ratios["floor/trio"].append(f / t)
        print(f"{placement:8} run {run}: rows/s trio {t:7.0f} floor {f:7.0f} cpp {c:7.0f}"
              f"  trio/cpp {t/c:.2f} floor/cpp {f/c:.2f} floor/trio {f/t:.2f}"
              f"  drops trio {d['trio'][2]} floor {d['floor'][2]} cpp {d['cpp'][2]}")
    medians = {
        k: f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" for k, v in ratios.items()
    }
    print(placement, medians)
