"""Where a burst's real wake waited, from ``batch-trace.patch``'s per-batch trace: for each batch
holding a real wake with more than 50 frames handled in the 5 ms before it, the batches in that
window, their frames, the time spent inside them (decode and ack) and the gaps between them (the
connection task not handling frames: rows and shadow starts, other tasks' steps, or the process
not running: the trace cannot tell which).

  trace_gaps.py trace1-batches.txt

A trace line: batch start ns, batch end ns, frames, unconsumed bytes after it, whether its reads
waited, whether it acked a real wake.
"""

import statistics
import sys

WINDOW_NS = 5_000_000

with open(sys.argv[1]) as handle:
    rows = [tuple(int(field) for field in line.split()) for line in handle]
for index, (start, _, frames, _, _, real) in enumerate(rows):
    if not real:
        continue
    first = index
    while first > 0 and start - rows[first - 1][0] < WINDOW_NS:
        first -= 1
    before = rows[first:index]
    handled = sum(row[2] for row in before)
    if handled <= 50:
        continue
    inside = sum(row[1] - row[0] for row in before)
    span = start - before[0][0]
    after = [*before[1:], rows[index]]
    gaps = [later[0] - earlier[1] for earlier, later in zip(before, after, strict=True)]
    print(
        f"{len(before):2} batches, {handled} frames in {span / 1e3:6.0f} us before the real"
        f" wake's batch: inside batches {inside / 1e3:4.0f} us ({inside / handled / 1e3:.1f} a"
        f" frame), between them {sum(gaps) / 1e3:5.0f} us (median gap"
        f" {statistics.median(gaps) / 1e3:6.1f}, longest {max(gaps) / 1e3:6.1f} us);"
        f" the real wake's batch: {frames} frames"
    )
