"""Per burst: variant, placement, client, pauses over 1 ms, the longest, and the causes' split.

  summary.py DIR SCHED FORKS EXECUTORS CLIENTS RUNS

EXECUTORS: how many executors the invocation named; CLIENTS: how many clients; RUNS: --runs. The
placement of each burst is where the harness's order puts it (``bench.harness.runner.run_all``:
configurations executor x client, every executor unpinned then pinned, rotated by one per run; one
client process per configuration, so the client files in pid order follow it). The CPUs the
threads ran on cannot tell (an unpinned executor and client often stay apart).

FORKS: the ``PERF_RECORD_FORK`` lines of ``perf script --show-task-events`` (which thread belongs
to which process).

Reads DIR's ``pauses.txt`` (``pauses.py``'s output) and ``sched_gaps.txt`` (``sched_gaps.py``'s),
and from SCHED (``perf script`` text) the CPUs the executor's connection thread and the client ran on
(the thread only on CPU 1 and the client only on CPU 0: ``pinned``). The variant is the executor file's name (``ex-<variant>.<pid>.json``;
``ex-perf`` is the C++ port, read from the kernel's trace). A pause's cause, from its split:
``busy`` (the connection thread running >= half the gap), ``cpu`` (runnable, not running, >= half),
``asleep`` (otherwise), with what held its CPU most.
"""

import glob
import json
import re
import sys
from collections import defaultdict


def switch_ins(sched, tids):
    """(ns, cpu) of every time a thread of ``tids`` was switched in."""
    seen = defaultdict(list)
    pattern = re.compile(r"\[(\d+)\]\s+([\d.]+):.*sched_switch:.*next_pid=(\d+)")
    with open(sched) as handle:
        for line in handle:
            if "sched_switch" not in line:
                continue
            m = pattern.search(line)
            if m and int(m.group(3)) in tids:
                seen[int(m.group(3))].append((round(float(m.group(2)) * 1e9), int(m.group(1))))
    return seen


def main():
    directory = sys.argv[1]
    sections = []
    for line in open(f"{directory}/pauses.txt"):
        if line.startswith("=="):
            m = re.search(r"client\.\d+\.json \((\S+), (\d+) writes over ([\d.]+) ms\) x \S*/(ex[^/]*?)\.(\d+)\.json", line)
            client_file = re.search(r"(\S*client\.\d+\.json)", line).group(1)
            writes = json.load(open(client_file if client_file.startswith("/") else f"{directory}/{client_file}"))["writes"]
            sections.append(dict(w0=writes[0][0], w1=writes[-1][0] + 20_000_000, client=m.group(1), writes=int(m.group(2)), span_ms=float(m.group(3)), variant=m.group(4), pid=int(m.group(5)), rows=[]))
        elif line.strip().startswith("{"):
            sections[-1]["rows"].append(json.loads(line))
    splits = []
    for line in open(f"{directory}/sched_gaps.txt"):
        if line.strip().startswith("gap"):
            splits.append(line.strip())
    k = 0
    for s in sections:
        for row in s["rows"]:
            row["split"] = splits[k]
            k += 1
    owner = {}
    for line in open(sys.argv[3]):
        m = re.search(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)", line)
        if m:
            owner[int(m.group(2))] = int(m.group(1))
    placement = {}
    clients = {}
    for line in open(f"{directory}/pauses.txt"):
        if line.startswith("=="):
            m = re.search(r"client\.(\d+)\.json.*\.(\d+)\.json", line)
            clients[int(m.group(2))] = int(m.group(1))
    pids = {s["pid"] for s in sections} | set(clients.values())
    n_exec, n_clients, runs = (int(v) for v in sys.argv[4:7])
    configurations = [(placement, e, c) for placement in ("unpinned", "pinned") for e in range(n_exec) for c in range(n_clients)]
    order = []
    for run in range(runs):
        shift = run % len(configurations)
        order += configurations[shift:] + configurations[:shift]
    client_pids = sorted(int(re.search(r"client\.(\d+)\.json", path).group(1)) for path in glob.glob(f"{directory}/client.*.json"))
    where = {pid: order[i][0] for i, pid in enumerate(client_pids)} if len(client_pids) == len(order) else {}
    for s in sections:
        placement[s["pid"]] = where.get(clients[s["pid"]], "?")
    print("variant placement client writes n_pauses longest_us total_us causes")
    for s in sections:
        causes = []
        for row in s["rows"]:
            split = row["split"]
            gap = row["gap_us"]
            vals = dict((k2, float(v)) for k2, v in re.findall(r"(running|runnable|asleep-\S+) (\d+)", split.split("|")[0]))
            running = vals.get("running", 0)
            runnable = vals.get("runnable", 0)
            others = split.split("|")[1]  # what ran on the CPU the thread waited for
            if running >= gap / 2:
                cause = "busy"
            elif runnable >= gap / 2:
                # what held a CPU most, other than the thread itself
                names = re.findall(r"([\w:./ -]+?)/(\d+) (\d+)", others)
                best = max(((int(v), n.strip().split()[-1], int(pid)) for n, pid, v in names if int(pid) != row["tid"]), default=(0, "?", 0))
                tid = best[2]
                if tid == clients[s["pid"]]:
                    who = "client"
                elif owner.get(tid, tid) == s["pid"]:
                    who = "own:" + best[1].split(":")[0]
                elif best[1].startswith("swapper"):
                    who = "idle?"
                else:
                    who = "other:" + best[1]
                cause = f"cpu:{who}"
            else:
                cause = "asleep:" + ",".join(k2 for k2 in vals if k2.startswith("asleep"))
            causes.append(f"{gap:.0f}={cause}")
        longest = max((r["gap_us"] for r in s["rows"]), default=0)
        total = sum(r["gap_us"] for r in s["rows"])
        print(f"{s['variant']} {placement.get(s['pid'], '?')} {s['client']} {s['writes']} {len(s['rows'])} {longest:.0f} {total:.0f} {' '.join(causes)}")


if __name__ == "__main__":
    main()
