"""Where the executor's main thread was during each burst's longest gap (BENCHMARK.md, H16).

  burst_sched.py TRACE SCHED ROLES

TRACE: ``batch-trace.patch``'s per-batch lines (start ns, end ns, frames, unconsumed bytes,
whether the reads waited, whether a real wake was acked), stamped with ``perf_counter_ns``.
SCHED: ``perf script -F comm,pid,tid,cpu,time,event,trace`` of ``perf sched record -a -k
CLOCK_MONOTONIC`` (the same clock). ROLES: ``pid=name`` pairs: the executor's main thread, then
the client's, then any other to name.

For each batch holding a real wake with more than 50 frames handled in the 5 ms before it (as
``trace_gaps.py`` picks them), the longest gap between those batches is split, for the
executor's main thread and for the client, into running, runnable and not running, and asleep;
for the runnable part, which task held the CPU whose queue the thread waited on; and who held
each CPU.
"""

import re
import sys
from collections import Counter, defaultdict

WINDOW_NS = 5_000_000
EVENT = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")


def batches(path: str) -> list[tuple[int, ...]]:
    with open(path) as handle:
        return [tuple(int(field) for field in line.split()) for line in handle]


def longest_gaps(rows: list[tuple[int, ...]]) -> list[tuple[int, int, int]]:
    """Per burst: (gap start, gap end, frames handled before the gap in the window)."""
    found = []
    for index, row in enumerate(rows):
        if not row[5]:
            continue
        first = index
        while first > 0 and row[0] - rows[first - 1][0] < WINDOW_NS:
            first -= 1
        before = rows[first:index]
        if sum(earlier[2] for earlier in before) <= 50:
            continue
        after = [*before[1:], row]
        pairs = list(zip(before, after, strict=True))
        earlier, later = max(pairs, key=lambda pair: pair[1][0] - pair[0][1])
        handled = sum(b[2] for b in before if b[0] <= earlier[0])
        found.append((earlier[1], later[0], handled))
    return found


def events(path: str) -> list[tuple[int, int, str, dict[str, str]]]:
    """(ns, cpu, event, fields) for the switch, waking and migrate events."""
    parsed = []
    with open(path) as handle:
        for line in handle:
            match = EVENT.search(line)
            if match is None:
                continue
            cpu, stamp, name, rest = match.groups()
            if name in ("sched_switch", "sched_waking", "sched_migrate_task"):
                ns = round(float(stamp) * 1e9)
                parsed.append((ns, int(cpu), name, dict(FIELD.findall(rest))))
    return parsed


def timelines(
    parsed: list[tuple[int, int, str, dict[str, str]]], tid: str
) -> tuple[list[tuple[int, str, int]], dict[int, list[tuple[int, str]]]]:
    """The thread's states ((ns, running|runnable|asleep, its queue's cpu)) and each cpu's task."""
    states: list[tuple[int, str, int]] = []
    current: dict[int, list[tuple[int, str]]] = defaultdict(list)
    state, queue = "asleep", 0
    for ns, cpu, name, fields in parsed:
        if name == "sched_switch":
            current[cpu].append((ns, fields["next_pid"]))
            if fields["next_pid"] == tid:
                state, queue = "running", cpu
            elif fields["prev_pid"] == tid:
                preempted = fields["prev_state"].startswith("R")
                state, queue = ("runnable" if preempted else "asleep"), cpu
            else:
                continue
        elif fields.get("pid") != tid:
            continue
        elif name == "sched_waking":
            if state == "asleep":
                state = "runnable"
            queue = int(fields["target_cpu"])
        else:
            queue = int(fields["dest_cpu"])
        states.append((ns, state, queue))
    return states, current


def holder(current: list[tuple[int, str]], start: int, end: int) -> Counter[str]:
    """ns each pid held this cpu within [start, end)."""
    held: Counter[str] = Counter()
    for (ns, pid), (next_ns, _) in zip(current, [*current[1:], (end, "")], strict=True):
        low, high = max(ns, start), min(next_ns, end)
        if high > low:
            held[pid] += high - low
    return held


def named(shares: list[tuple[str, int]], roles: dict[str, str]) -> str:
    """``name µs`` for each (pid, ns), the pid's role where it has one."""
    return ", ".join(f"{roles.get(pid, 'pid ' + pid)} {ns / 1e3:.0f}" for pid, ns in shares)


def split(
    states: list[tuple[int, str, int]],
    current: dict[int, list[tuple[int, str]]],
    start: int,
    end: int,
    roles: dict[str, str],
) -> str:
    """One thread's running, runnable and asleep time in [start, end), and whom it waited behind."""
    spent: Counter[str] = Counter()
    waited_behind: Counter[str] = Counter()
    following = [*states[1:], (end, "", 0)]
    for (ns, state, queue), (next_ns, _, _) in zip(states, following, strict=True):
        low, high = max(ns, start), min(next_ns, end)
        if high <= low:
            continue
        spent[state] += high - low
        if state == "runnable":
            waited_behind.update(holder(current[queue], low, high))
    behind = named(waited_behind.most_common(3), roles)
    return (
        f"running {spent['running'] / 1e3:5.0f}, runnable {spent['runnable'] / 1e3:5.0f},"
        f" asleep {spent['asleep'] / 1e3:5.0f} us; runnable behind: {behind or '-'}"
    )


def main() -> None:
    rows = batches(sys.argv[1])
    parsed = events(sys.argv[2])
    roles = dict(pair.split("=") for pair in sys.argv[3:])
    watched = [pair.split("=")[0] for pair in sys.argv[3:5]]
    timeline = {tid: timelines(parsed, tid) for tid in watched}
    for gap_start, gap_end, handled in longest_gaps(rows):
        print(f"gap {(gap_end - gap_start) / 1e3:6.0f} us after {handled:3} frames:")
        for tid in watched:
            states, current = timeline[tid]
            print(f"  {roles[tid]:>9}: {split(states, current, gap_start, gap_end, roles)}")
        for cpu, held in sorted(timeline[watched[0]][1].items()):
            shares = holder(held, gap_start, gap_end).most_common(3)
            print(f"  {'cpu ' + str(cpu):>9}: {named(shares, roles)}")


main()
