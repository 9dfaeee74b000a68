"""Scratch: a real wake on a second connection while the first starts its held shadow wakes.

Run from the repository root with PYTHONPATH=. :

  two_connections.py OUT_CSV RUNS ROUNDS EXECUTOR...   (PLACEMENTS=unpinned,pinned)

Per executor, run and placement: one executor process (no exchange), one client process (this
one) with two connections. Each round writes SHADOWS shadow wakes to the first connection in one
write and reads all their acks (so the executor has caught up and is starting the shadows it
held), then writes one real wake to the second and times it from before its write until its whole
ack is read; then sleeps GAP_S for the shadows to finish. Executors interleave within a run.
"""
import csv
import dataclasses
import os
import socket
import statistics
import sys
import tempfile
import time

from bench.clients.frames import wake_message
from bench.harness.placement import placed
from bench.harness.processes import RunningExecutor, executor_spec
from executor.wire.protocol import decode_wake_ack, encode_frame

SHADOWS = 200
GAP_S = 0.03


def frame(cid: str, dry_run: bool) -> bytes:
    message = wake_message(cid, time.perf_counter_ns())
    return encode_frame(dataclasses.replace(message, dry_run=dry_run))


def read_acks(sock: socket.socket, count: int) -> None:
    with sock.makefile("rb") as reader:
        for _ in range(count):
            length = int.from_bytes(reader.read(4), "big")
            ack = decode_wake_ack(reader.read(length))
            if ack.status != "accepted":
                raise RuntimeError(ack)


def one(spec, rounds: int, tag: str) -> list[float]:
    directory = tempfile.mkdtemp(prefix="two-")
    path = os.path.join(directory, "x.sock")
    with RunningExecutor(spec, path, os.path.join(directory, "t.db")):
        first = socket.socket(socket.AF_UNIX)
        first.connect(path)
        second = socket.socket(socket.AF_UNIX)
        second.connect(path)
        times = []
        for r in range(rounds):
            burst = b"".join(frame(f"{tag}-s{r}-{i}", True) for i in range(SHADOWS))
            real = frame(f"{tag}-r{r}", False)
            first.sendall(burst)
            read_acks(first, SHADOWS)
            start = time.perf_counter_ns()
            second.sendall(real)
            read_acks(second, 1)
            times.append((time.perf_counter_ns() - start) / 1000)
            time.sleep(GAP_S)
        first.close()
        second.close()
    return times


def main() -> None:
    out, runs, rounds, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    placements = os.environ.get("PLACEMENTS", "unpinned,pinned").split(",")
    rows = []
    for run in range(1, runs + 1):
        for placement in placements:
            for index, name in enumerate(names):
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
                spec = placed(executor_spec(name), placement)
                if spec.client_cpus:
                    os.sched_setaffinity(0, spec.client_cpus)
                times = one(spec, rounds, f"e{index}")
                times.sort()
                p50, p99 = statistics.median(times), times[int(0.99 * (len(times) - 1))]
                print(
                    f"run {run} {placement:8} executor {index}:"
                    f" p50 {p50:8.1f} us  p99 {p99:8.1f} us",
                    flush=True,
                )
                rows += [(run, placement, index, t) for t in times]
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("run", "placement", "executor", "second_real_roundtrip_us"))
        writer.writerows(rows)


if __name__ == "__main__":
    main()
