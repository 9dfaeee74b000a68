"""H46-H48 of the fourth pass (docs/performance/plan/2026-12-06.md) from F1, F2 and F3.

    python spans.py F1/summary.csv F2/samples.csv.xz F3/summary.csv

F1 and F3: each run's p50/p99 as the harness wrote them (summary.csv), medians across runs. F2:
per run the p50 of the per-frame difference wake_recv - wake_frame (same index = same frame:
both in row order, one connection), the ``send`` a frame acked alone pays; median across runs.
"""

from __future__ import annotations

import csv
import lzma
import statistics
import sys
from collections import defaultdict


def short(executor: str) -> str:
    pinned = "@pinned" if executor.endswith("@pinned") else ""
    if "executor_hotpath" in executor:
        return "port" + pinned
    if "--telemetry-capacity 16384" in executor:
        return "spans16k" + pinned
    return ("spans" if "--frame-spans" in executor else "plain") + pinned


def p50(values: list[float]) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * 0.5
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(path: str) -> dict[tuple[str, str, str, str], float]:
    """(executor, client, span, p50_us|p99_us) -> median across runs."""
    runs: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            for column in ("p50_us", "p99_us"):
                key = (short(row["executor"]), row["client"], row["span"], column)
                runs[key].append(float(row[column]))
    return {key: statistics.median(values) for key, values in runs.items()}


def paced(path: str) -> dict[str, tuple[float, float, float, float]]:
    """Per placement: medians across runs of p50 wake_recv, wake_frame, their per-frame
    difference, and the port's wake_recv."""
    samples: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            key = (short(row["executor"]), row["span"], int(row["run"]))
            samples[key].append(float(row["duration_us"]))
    out = {}
    for placement in ("", "@pinned"):
        spans = "spans" + placement
        runs = sorted(run for (e, s, run) in samples if (e, s) == (spans, "wake_frame"))
        whole = [samples[(spans, "wake_recv", run)] for run in runs]
        own = [samples[(spans, "wake_frame", run)] for run in runs]
        port = [samples[("port" + placement, "wake_recv", run)] for run in runs]
        pairs = zip(whole, own, strict=True)
        sends = [p50([w - f for w, f in zip(a, b, strict=True)]) for a, b in pairs]
        out[placement] = (
            statistics.median(map(p50, whole)),
            statistics.median(map(p50, own)),
            statistics.median(sends),
            statistics.median(map(p50, port)),
        )
    return out


def main() -> None:
    burst, f2 = summary(sys.argv[1]), paced(sys.argv[2])
    for placement, (whole, own, send, port) in f2.items():
        print(
            f"F2 paced {placement or 'unpinned'}: spans wake_recv {whole:.2f}  wake_frame {own:.2f}"
            f"  send (p50 of wake_recv - wake_frame) {send:.2f}  port wake_recv {port:.2f}"
        )
    for placement in ("", "@pinned"):
        send = f2[placement][2]
        for client in ("reference-asyncio", "reference-uvloop"):
            port = burst[("port" + placement, client, "wake_recv", "p50_us")]
            own = burst[("spans" + placement, client, "wake_frame", "p50_us")]
            joined = burst[("spans" + placement, client, "wake_recv", "p50_us")]
            plain = burst[("plain" + placement, client, "wake_recv", "p50_us")]
            print(
                f"F1 {client} {placement or 'unpinned'}: port wake_recv {port:.2f}"
                f"  wake_frame {own:.2f} ({own / port:.2f}x)"
                f"  wake_frame + send {own + send:.2f} ({(own + send) / port:.2f}x; H46 <= 3x)"
                f"  wake_recv spans/plain {joined:.2f}/{plain:.2f} = {joined / plain:.2f}x"
                f" (H47 0.9-1.1x)  plain/port {plain / port:.2f}x"
            )
    if len(sys.argv) > 3:
        f3 = summary(sys.argv[3])
        for placement in ("", "@pinned"):
            for client in ("reference-asyncio", "reference-uvloop"):
                plain = f3[("plain" + placement, client, "wake_recv", "p50_us")]
                port99 = f3[("port" + placement, client, "wake_send", "p99_us")]
                for name in ("spans", "spans16k", "plain", "port"):
                    e = name + placement
                    recv = f3[(e, client, "wake_recv", "p50_us")]
                    own = f3.get((e, client, "wake_frame", "p50_us"), float("nan"))
                    send50 = f3[(e, client, "wake_send", "p50_us")]
                    send99 = f3[(e, client, "wake_send", "p99_us")]
                    print(
                        f"F3 {client:<17} {e:<16} wake_recv {recv:6.2f} ({recv / plain:.2f}x plain)"
                        f"  wake_frame {own:5.2f}  wake_send p50 {send50:6.1f}"
                        f"  p99 {send99:7.1f} ({send99 / port99:.2f}x port)"
                    )


if __name__ == "__main__":
    main()
