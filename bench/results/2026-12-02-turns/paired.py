"""Per-run paired ratios, trio over shadows-ignore-others, from a saturation.csv."""
import csv
import sys
from collections import defaultdict

with open(sys.argv[1], newline="") as handle:
    rows = list(csv.DictReader(handle))
d: dict[tuple[str, str, str], dict[str, dict[str, str]]] = defaultdict(dict)
for r in rows:
    kind = "variant" if "ignore" in r["executor"] else "trio"
    placement = "pinned" if r["executor"].endswith("@pinned") else "unpinned"
    d[(r["load"], placement, r["run"])][kind] = r
for key, v in sorted(d.items()):
    t, o = v["trio"], v["variant"]
    print(
        *key,
        f"acked {float(t['accepted_per_s']) / float(o['accepted_per_s']):.2f}",
        f"drops {t['drops']} / {o['drops']}",
    )
