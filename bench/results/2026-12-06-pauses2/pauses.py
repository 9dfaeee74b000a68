"""Every read pause of a traced burst, and what was going on inside it (2026-12-06, issue 34).

Second pass: the first pass's ``pauses.py`` with one change: a ``recv`` that returned 0 bytes
before the last read is not a read (it was given no room: a buffer full to its end, where
``frame_waiting`` read into an empty slice), so the gap around it counts whole.

  pauses.py DIR [--threshold-us 1000]

DIR holds ``trace.patch``'s files: ``ex.<pid>.json`` (the executor: reads, task steps, writer
batches, collections) and ``client.<pid>.json`` (the reference client's writes: stamp after each
``write()``, bytes written so far, the transport's own buffer). Each client file is paired with
the executor file whose reads overlap its writes. A pause is a gap of more than the threshold
between two successive ``recv`` calls of the connection loop while bytes past those read so far
had been written by the client before the earlier call returned. One line per pause, then a
summary per burst. All stamps are ``perf_counter_ns`` (CLOCK_MONOTONIC) of both processes.
"""

import bisect
import glob
import json
import sys
from collections import defaultdict


def load(pattern):
    out = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as handle:
            data = json.load(handle)
        data["path"] = path
        out.append(data)
    return out


def overlap(a0, a1, b0, b1):
    return max(0, min(a1, b1) - max(a0, b0))


def pauses(ex, client, threshold_ns):
    writes = client["writes"]
    stamps = [w[0] for w in writes]
    totals = [w[1] for w in writes]
    reads = [r for r in ex["reads"][:-1] if r[2] != 0] + ex["reads"][-1:]
    t_first, t_last = writes[0][0], writes[-1][0]
    consumed = 0
    rows = []
    steps = ex["steps"]
    step_starts = [s[0] for s in steps]
    for prev, nxt in zip(reads, reads[1:]):
        if prev[2] > 0:
            consumed += prev[2]
        t0, t1 = prev[0], nxt[0]
        if t1 < t_first or t0 > t_last + 50_000_000:
            continue
        if t1 - t0 <= threshold_ns:
            continue
        k = bisect.bisect_right(totals, consumed)  # first write taking the client past `consumed`
        if k >= len(writes) or stamps[k] >= t0:
            continue  # nothing was waiting
        gap = t1 - t0
        loop_cpu = nxt[1] - prev[1]
        fires = nxt[3] - prev[3]
        by_task = defaultdict(lambda: [0, 0, 0])  # wall in gap, cpu, steps
        longest = (0, "")
        lo = bisect.bisect_left(step_starts, t0 - 100_000_000)
        for s0, s1, scpu, name in steps[lo:]:
            if s0 > t1:
                break
            ov = overlap(s0, s1, t0, t1)
            if ov <= 0:
                continue
            entry = by_task[name.rsplit(".", 1)[-1]]
            entry[0] += ov
            entry[1] += scpu
            entry[2] += 1
            if ov > longest[0]:
                longest = (ov, name.rsplit(".", 1)[-1])
        gcs = []
        open_gc = {}
        for phase, gen, ns in ex["gcs"]:
            if phase == "start":
                open_gc[gen] = ns
            elif gen in open_gc:
                s = open_gc.pop(gen)
                if overlap(s, ns, t0, t1) > 0:
                    gcs.append((gen, ns - s))
        batches = [
            (b[1] - b[0], b[2], b[3]) for b in ex["batches"] if overlap(b[0], b[1], t0, t1) > 0
        ]
        batch_wall = sum(overlap(b[0], b[1], t0, t1) for b in ex["batches"])
        enc = sum(overlap(e[0], e[1], t0, t1) for e in ex["encodes"])
        io = sum(overlap(w[0], w[1], t0, t1) for w in ex["iowaits"])
        waiting_frames = bisect.bisect_right(stamps, t0) - k
        rows.append(
            dict(
                tid=ex.get("tid") or int(ex["path"].rsplit(".", 2)[-2]),
                t0=t0,
                t1=t1,
                at_ms=(t0 - t_first) / 1e6,
                gap_us=gap / 1e3,
                loop_cpu_us=loop_cpu / 1e3,
                fires=fires,
                writes_waiting=waiting_frames,
                steps_in_gap=sum(v[2] for v in by_task.values()),
                tasks={k2: (round(v[0] / 1e3), v[2]) for k2, v in sorted(by_task.items(), key=lambda kv: -kv[1][0])[:4]},
                longest_step=(round(longest[0] / 1e3), longest[1]),
                gc=gcs,
                writer_batch_us=round(batch_wall / 1e3),
                writer_batches=[(round(w / 1e3), r, round(c / 1e3)) for w, r, c in batches],
                encode_us=round(enc / 1e3),
                io_wait_us=round(io / 1e3),
            )
        )
    return rows


def main():
    directory = sys.argv[1]
    threshold_us = 1000
    if "--threshold-us" in sys.argv:
        threshold_us = float(sys.argv[sys.argv.index("--threshold-us") + 1])
    executors = load(f"{directory}/ex*.json")
    clients = load(f"{directory}/client.*.json")
    for client in clients:
        w0, w1 = client["writes"][0][0], client["writes"][-1][0]
        matches = [e for e in executors if e["reads"] and overlap(e["reads"][0][0], e["reads"][-1][0], w0, w1) > 0]
        if not matches:
            print(f"{client['path']}: no traced executor (an untraced executor's burst)")
            continue
        ex = max(matches, key=lambda e: overlap(e["reads"][0][0], e["reads"][-1][0], w0, w1))
        rows = pauses(ex, client, threshold_us * 1000)
        span = (w1 - w0) / 1e6
        print(f"== {client['path']} ({client['client']}, {len(client['writes'])} writes over {span:.1f} ms) x {ex['path']}: {len(rows)} pauses > {threshold_us:.0f} us")
        for row in rows:
            print("  " + json.dumps(row))
        if rows:
            print(f"  longest {max(r['gap_us'] for r in rows):.0f} us, total {sum(r['gap_us'] for r in rows):.0f} us")


if __name__ == "__main__":
    main()
