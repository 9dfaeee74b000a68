"""The C++ port's reads, from the kernel's trace, as ``pauses.py`` reads a traced executor's.

  perf_reads.py SCHED OUTDIR [COMM]

SCHED: ``perf script --ns -F comm,pid,tid,cpu,time,event,trace`` of a ``perf record -a -k
CLOCK_MONOTONIC`` holding ``syscalls:sys_exit_read`` (and ``sys_exit_recvfrom``). For every
process of COMM (default ``executor_hotpat``, the port's name cut by the kernel), its connection
thread (the thread with the most 4-byte reads: the frame prefixes) gives one ``ex-perf.<pid>.json``
in OUTDIR: each read's end stamp and the bytes it returned. No CPU, steps or writer figures (the
port has no such trace); the thread's scheduler states are ``sched_gaps.py``'s.
"""

import json
import re
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+syscalls:sys_exit_(read|recvfrom):\s+(0x[0-9a-f]+)")


def main():
    sched, outdir = sys.argv[1], sys.argv[2]
    comm = sys.argv[3] if len(sys.argv) > 3 else "executor_hotpat"
    reads = defaultdict(list)
    with open(sched) as handle:
        for line in handle:
            match = LINE.match(line)
            if not match or match.group(1) != comm:
                continue
            _, pid, tid, _, stamp, _, ret = match.groups()
            value = int(ret, 16)
            if value >= 1 << 63:
                value -= 1 << 64
            reads[(int(pid), int(tid))].append((round(float(stamp) * 1e9), value))
    by_pid = defaultdict(list)
    for (pid, tid), items in reads.items():
        by_pid[pid].append((sum(1 for _, v in items if v == 4), tid, items))
    for pid, threads in by_pid.items():
        _, tid, items = max(threads)
        rows = [(ns, 0, value if value > 0 else -1, 0, 0) for ns, value in items]
        with open(f"{outdir}/ex-perf.{pid}.json", "w") as out:
            json.dump({"reads": rows, "tid": tid, "batches": [], "encodes": [], "gcs": [], "steps": [], "iowaits": []}, out)
        print(f"pid {pid} tid {tid}: {len(rows)} reads")


if __name__ == "__main__":
    main()
