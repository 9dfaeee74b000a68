"""Per burst, without a kernel trace: variant, placement, client, pauses over 1 ms, the longest,
and each pause's kind (2026-12-06 second pass, issue 34).

  summary_nosched.py DIR EXECUTORS CLIENTS RUNS

Reads DIR's ``pauses.txt`` (``../2026-12-06-pauses/pauses.py``). A pause is ``busy`` when the
connection thread's own CPU in it (``loop_cpu_us``) is at least half the gap, else ``notbusy``
(the loop thread not running: in the first pass's kernel traces, runnable behind its own writer
thread or, rarely, behind another process). The placement of each burst is the harness's order,
as in ``../2026-12-06-pauses/summary.py`` (every executor unpinned then pinned, x clients,
rotated by one per run; client files in pid order). Output: ``table.py``'s input.
"""

import glob
import json
import re
import sys


def main():
    directory = sys.argv[1]
    n_exec, n_clients, runs = (int(v) for v in sys.argv[2:5])
    sections = []
    for line in open(f"{directory}/pauses.txt"):
        if line.startswith("=="):
            m = re.search(
                r"client\.(\d+)\.json \((\S+), (\d+) writes over [\d.]+ ms\) x \S*/(ex[^/]*?)\.(\d+)\.json",
                line,
            )
            sections.append(
                dict(client_pid=int(m.group(1)), client=m.group(2), writes=int(m.group(3)),
                     variant=m.group(4), rows=[])
            )
        elif line.strip().startswith("{"):
            sections[-1]["rows"].append(json.loads(line))
    configurations = [
        (placement, e, c) for placement in ("unpinned", "pinned") for e in range(n_exec) for c in range(n_clients)
    ]
    order = []
    for run in range(runs):
        shift = run % len(configurations)
        order += configurations[shift:] + configurations[:shift]
    client_pids = sorted(
        int(re.search(r"client\.(\d+)\.json", path).group(1)) for path in glob.glob(f"{directory}/client.*.json")
    )
    where = {pid: order[i][0] for i, pid in enumerate(client_pids)} if len(client_pids) == len(order) else {}
    print("variant placement client writes n_pauses longest_us total_us causes")
    for s in sections:
        causes = [
            f"{r['gap_us']:.0f}={'busy' if r['loop_cpu_us'] >= r['gap_us'] / 2 else 'notbusy'}" for r in s["rows"]
        ]
        longest = max((r["gap_us"] for r in s["rows"]), default=0)
        total = sum(r["gap_us"] for r in s["rows"])
        print(
            f"{s['variant']} {where.get(s['client_pid'], '?')} {s['client']} {s['writes']} {len(s['rows'])}"
            f" {longest:.0f} {total:.0f} {' '.join(causes)}"
        )


if __name__ == "__main__":
    main()
