"""The notebook's pause table from ``summary.py``'s output: per executor, placement and client,
each run's pauses over 1 ms (count, longest in ms) and their causes, counted.

  table.py SUMMARY [LABEL=NAME ...]
"""

import sys
from collections import Counter, defaultdict


def main():
    labels = dict(arg.split("=", 1) for arg in sys.argv[2:])
    groups = defaultdict(list)
    for line in open(sys.argv[1]):
        parts = line.split()
        if parts[0] == "variant":
            continue
        variant, placement, client, _writes, count, longest, _total = parts[:7]
        causes = [item.split("=", 1)[1] for item in parts[7:]]
        groups[(labels.get(variant, variant), placement, client.replace("reference-", ""))].append(
            (int(count), int(longest), causes)
        )
    print("| executor | placement | poller | per run: pauses > 1 ms (longest, ms) | causes (all runs) |")
    print("|---|---|---|---|---|")
    for (variant, placement, client), runs in sorted(groups.items()):
        cells = ", ".join(f"{c} ({l / 1000:.1f})" if c else "0" for c, l, _ in runs)
        tally = Counter(cause for _, _, causes in runs for cause in causes)
        text = "; ".join(f"{name} {n}" for name, n in tally.most_common()) or "none"
        print(f"| {variant} | {placement} | {client} | {cells} | {text} |")


if __name__ == "__main__":
    main()
