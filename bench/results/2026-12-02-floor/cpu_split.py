"""Scratch: CPU seconds per thread of each executor over one flat-out saturation load.

Run from the repository root with PYTHONPATH=. .

Per executor and placement: the executor process's threads' utime+stime (from /proc) between
"socket ready" and SIGTERM, divided by the frames acked; main thread apart from the others.

  cpu_split.py ROUNDS EXECUTOR... (PLACEMENTS=pinned to run one placement)
"""
import os
import sys

from bench.harness.placement import placed
from bench.harness.processes import RunningExecutor, executor_spec
from bench.scenarios.throughput import run_rate

TICK = os.sysconf("SC_CLK_TCK")
snaps: dict[int, dict[int, float]] = {}
deltas: list[dict[int, float]] = []


def threads(pid: int) -> dict[int, float]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


enter, stop = RunningExecutor.__enter__, RunningExecutor.stop


def patched_enter(self):
    result = enter(self)
    snaps[self._process.pid] = threads(self._process.pid)
    return result


def patched_stop(self):
    pid = self._process.pid
    if self._process.poll() is None and pid in snaps:
        now = threads(pid)
        before = snaps.pop(pid)
        deltas.append({tid: now[tid] - before.get(tid, 0.0) for tid in now} | {-1: pid})
    return stop(self)


RunningExecutor.__enter__ = patched_enter
RunningExecutor.stop = patched_stop

names = sys.argv[2:]
rounds = int(sys.argv[1])
PLACEMENTS = os.environ.get("PLACEMENTS", "unpinned,pinned").split(",")
for r in range(rounds):
    for placement in PLACEMENTS:
        for name in names:
            spec = executor_spec(name)
            if placement == "pinned":
                spec = placed(spec, "pinned")
            result = run_rate(spec, 1, 3.0, 0.0, 64)
            d = deltas.pop()
            pid = int(d.pop(-1))
            main = d.get(pid, 0.0)
            other = sum(v for t, v in d.items() if t != pid)
            acked = result.acked
            print(
                f"{r+1} {placement:8} {name} acked/s {result.accepted_per_s:8.0f}"
                f" rows/s {result.rows_per_s:8.0f} drops {result.drops:6d}"
                f" main {main:5.2f}s {1e6*main/acked:5.2f}us/frame"
                f" others {other:5.2f}s {1e6*other/max(result.rows_written,1):5.2f}us/row"
                f" threads {len(d)}",
                flush=True,
            )
