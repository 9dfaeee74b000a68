"""Where a thread was during each pause ``pauses.py`` found: the kernel's view (issue 34).

  pauses.py DIR > pauses.txt; sched_gaps.py SCHED pauses.txt

SCHED: ``perf script --ns -F comm,pid,tid,cpu,time,event,trace`` of ``perf record -a -k
CLOCK_MONOTONIC -e sched:sched_switch,sched:sched_waking,syscalls:sys_enter_futex,
syscalls:sys_enter_epoll_wait,...``. For each pause (its executor's connection thread: the
traced executor's pid, or the ``tid`` ``perf_reads.py`` found), the gap is split into the thread
running, runnable and not running, asleep after a ``futex`` (in CPython: waiting for the GIL, or
a lock), asleep after an ``epoll_wait`` (Trio waiting for I/O), asleep otherwise (a blocking
read); and what else ran meanwhile: per CPU, the busiest other tasks.
"""

import json
import re
import sys
from collections import Counter, defaultdict

LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")


def parse(path):
    events = []
    with open(path) as handle:
        for line in handle:
            m = LINE.match(line)
            if not m:
                continue
            comm, pid, tid, cpu, stamp, event, rest = m.groups()
            if event in ("sched:sched_switch", "sched:sched_waking", "syscalls:sys_enter_futex", "syscalls:sys_enter_epoll_wait"):
                events.append((round(float(stamp) * 1e9), int(cpu), event, comm, int(tid), rest))
    events.sort()
    return events


def split(events, tid, t0, t1):
    """(running, runnable, asleep-futex, asleep-epoll, asleep-other) ns in [t0, t1], and others' CPU."""
    state, last_sys = "running", "?"
    queue = None
    behind = Counter()  # while runnable: what ran on the CPU the thread waited for
    totals = Counter()
    others = defaultdict(Counter)
    current = {}
    at = None
    for ns, cpu, event, comm, etid, rest in events:
        if ns > t1:
            break
        if at is not None and ns > t0:
            lo = max(at, t0)
            totals[state] += ns - lo
            if state == "runnable" and queue in current:
                behind[current[queue][0]] += ns - lo
        if event == "syscalls:sys_enter_futex" and etid == tid:
            last_sys = "futex"
        elif event == "syscalls:sys_enter_epoll_wait" and etid == tid:
            last_sys = "epoll"
        elif event == "sched:sched_switch":
            f = dict(FIELD.findall(rest))
            prev, nxt = int(f.get("prev_pid", -1)), int(f.get("next_pid", -1))
            if prev in current.get(cpu, (None, None))[:1] or True:
                old = current.get(cpu)
                if old is not None and ns > t0:
                    others[cpu][old[0]] += ns - max(old[1], t0)
                current[cpu] = (f"{f.get('next_comm', '?')}/{nxt}", ns)
            if prev == tid:
                pstate = f.get("prev_state", "S")
                state = "runnable" if pstate.startswith("R") else f"asleep-{last_sys}"
                queue = cpu
            if nxt == tid:
                state = "running"
                last_sys = "?"
        elif event == "sched:sched_waking":
            f = dict(FIELD.findall(rest))
            if int(f.get("pid", -1)) == tid and state.startswith("asleep"):
                state = "runnable"
                queue = int(f.get("target_cpu", queue or 0))
        at = ns
    if at is not None:
        totals[state] += t1 - max(at, t0)
        if state == "runnable" and queue in current:
            behind[current[queue][0]] += t1 - max(at, t0)
    for cpu, (name, since) in current.items():
        others[cpu][name] += t1 - max(since, t0)
    return totals, others, behind


def main():
    events = parse(sys.argv[1])
    section = None
    for line in open(sys.argv[2]):
        if line.startswith("=="):
            print(line.rstrip())
            section = line
            tid = int(re.search(r"tid=(\d+)", line).group(1)) if "tid=" in line else None
            continue
        if not line.strip().startswith("{"):
            continue
        row = json.loads(line)
        t0, t1 = row["t0"], row["t1"]
        totals, others, behind = split(events, row["tid"], t0, t1)
        gap = t1 - t0
        parts = " ".join(f"{k} {v / 1e3:.0f}" for k, v in sorted(totals.items()))
        busy = "; ".join(
            f"cpu{cpu}: " + ", ".join(f"{n} {v / 1e3:.0f}" for n, v in c.most_common(3)) for cpu, c in sorted(others.items())
        )
        held = ", ".join(f"{n} {v / 1e3:.0f}" for n, v in behind.most_common(2))
        print(f"  gap {gap / 1e3:.0f} us at {row['at_ms']:.1f} ms: thread {parts} | behind: {held} | {busy}")


if __name__ == "__main__":
    main()
