"""A soak of the real executor process: load, fuzz, vanishing peers, restarts and one crash.

Run ``python -m bench.scenarios.soak --minutes M [--connections K] [--seed S]``. Until the time
is up it repeats one cycle against a fresh ``python -m executor serve`` on the same socket and
database:

- **load**: K connections pipeline valid frames, each with a reader thread recording its acks;
- **fuzz**: mutated frames with correct length prefixes, each of which must get exactly one ack;
- **vanishing peers**: connections that send nothing, part of a frame, or whole frames, and close
  without reading;
- **held connections**: idle connections kept open through the cycle and the shutdown;
- **SIGTERM** during load, then: exit status 0, both counter identities, the database's new
  ``wake_recv`` rows equal ``rows_written``, and every acked load frame has its row.

Once per soak (the second cycle) the executor is SIGKILLed under load instead; the next start must
succeed on the same paths, the database must pass ``PRAGMA integrity_check``, and the acked frames
whose rows never reached the file are counted (``rows lost``). Exit status is 1 on any failure.

The pieces live in their own modules and are used by the reliability tests too: the executor
process, its exit counters and the database read-backs in ``bench.scenarios.soak_process``; the
load, fuzz and vanishing-peer clients in ``bench.clients.soak``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from bench.clients.soak import (
    FuzzResult,
    PipelinedClient,
    connect_client,
    fuzz_round,
    vanishing_peer,
)
from bench.scenarios.soak_process import (
    ExecutorProcess,
    identity_problems,
    ids_with_prefix,
    integrity_check,
    wake_recv_count,
)

CHANNEL_CAPACITY_ROWS: Final = 8192
BATCH_ROWS: Final = 500
LOSS_BOUND_ROWS: Final = CHANNEL_CAPACITY_ROWS + BATCH_ROWS
"""Most acked rows a SIGKILL can lose: a full telemetry channel plus one uncommitted batch. Rows
already dropped because the channel was full add to that, and a SIGKILL loses their count, so the
crash cycles pace their load below what the writer sustains (``PACED_FRAMES_PER_S``)."""

PACED_FRAMES_PER_S: Final = 1000.0
"""Per-connection rate of the load in a SIGKILL cycle (frames/s): four connections stay well under
the writer's throughput measured by the soak (about 7,000 rows/s on a loaded 2-core machine)."""


@dataclasses.dataclass
class SoakFigures:
    frames_sent: int = 0
    acked: int = 0
    fuzzed: int = 0
    peers_killed: int = 0
    connections_held: int = 0
    restarts: int = 0
    cycles: int = 0
    rows_lost: int = 0
    killed_acked: int = 0
    unacked: int = 0
    dropped_ring_full: int = 0
    dropped_oversized_id: int = 0
    dropped_write_failed: int = 0
    max_rss_kib: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"frames sent: {self.frames_sent}",
            f"acked: {self.acked}",
            f"fuzzed: {self.fuzzed}",
            f"peers killed: {self.peers_killed}",
            f"connections held: {self.connections_held}",
            f"restarts: {self.restarts} ({self.cycles} cycles, one SIGKILL)",
            f"rows lost (acked, missing after SIGKILL): {self.rows_lost}"
            f" of {self.killed_acked} acked in the killed life",
            f"orderly exits: unacked {self.unacked}, dropped_ring_full {self.dropped_ring_full},"
            f" dropped_oversized_id {self.dropped_oversized_id},"
            f" dropped_write_failed {self.dropped_write_failed}",
            f"max executor RSS: {self.max_rss_kib} KiB",
            f"failures: {len(self.failures)}",
            *(f"  FAILURE: {failure}" for failure in self.failures),
        ]


class Soak:
    """The cycle loop; figures accumulate in :attr:`figures`."""

    def __init__(
        self, directory: Path, *, connections: int, seed: int, load_s: float, held: int
    ) -> None:
        self.socket_path = directory / "soak.sock"
        self.db_path = directory / "soak.db"
        self.connections = connections
        self.rng = random.Random(seed)
        self.load_s = load_s
        self.held = held
        self.figures = SoakFigures()

    def fail(self, message: str) -> None:
        self.figures.failures.append(message)
        print(f"FAILURE: {message}", flush=True)

    def run(self, deadline: float) -> SoakFigures:
        killed_ids: list[str] | None = None
        while True:
            cycle = self.figures.cycles
            # The second cycle ends in SIGKILL; the soak always runs the cycle after it.
            crash = cycle == 1
            if cycle >= 3 and time.monotonic() > deadline:
                break
            self.figures.cycles += 1
            acked = self.cycle(cycle, crash=crash)
            if acked is None:
                break
            if crash:
                killed_ids = acked
            elif killed_ids is not None:
                self.check_crash_losses(killed_ids)
                killed_ids = None
        return self.figures

    def check_crash_losses(self, killed_ids: list[str]) -> None:
        verdict = integrity_check(self.db_path)
        if verdict != "ok":
            self.fail(f"integrity_check after SIGKILL: {verdict}")
        present = ids_with_prefix(self.db_path, "c0001-")
        lost = sum(1 for cid in killed_ids if cid not in present)
        self.figures.rows_lost = lost
        self.figures.killed_acked = len(killed_ids)
        print(f"SIGKILL cycle: {len(killed_ids)} acked, {lost} rows missing", flush=True)
        if lost > LOSS_BOUND_ROWS:
            self.fail(f"{lost} acked rows lost to SIGKILL, more than {LOSS_BOUND_ROWS}")

    def cycle(self, cycle: int, *, crash: bool) -> list[str] | None:
        """One executor life; the acked load ids (None when it could not start)."""
        rows_before = wake_recv_count(self.db_path)
        executor = ExecutorProcess(self.socket_path, self.db_path, grace_s=5.0)
        try:
            executor.wait_ready()
        except RuntimeError as error:
            self.fail(f"cycle {cycle}: start failed: {error}")
            executor.kill()
            return None
        if cycle:
            self.figures.restarts += 1
        prefix = f"c{cycle:04d}-"
        held = [connect_client(self.socket_path) for _ in range(self.held)]
        self.figures.connections_held += len(held)
        pace = PACED_FRAMES_PER_S if crash else None
        clients = [
            PipelinedClient(self.socket_path, f"{prefix}{k:02d}-", frames_per_s=pace).start()
            for k in range(self.connections)
        ]
        fuzz = FuzzResult()
        load_end = time.monotonic() + self.load_s
        try:
            while time.monotonic() < load_end:
                part = fuzz_round(self.socket_path, self.rng, 50)
                fuzz.frames += part.frames
                fuzz.accepted += part.accepted
                if part.failure:
                    self.fail(f"cycle {cycle}: fuzz: {part.failure}")
                for _ in range(5):
                    vanishing_peer(self.socket_path, self.rng, f"v{cycle:04d}-")
                    self.figures.peers_killed += 1
            self.figures.max_rss_kib = max(self.figures.max_rss_kib, executor.peak_rss_kib())
        except OSError as error:
            self.fail(f"cycle {cycle}: client error {error!r}")
        self.figures.fuzzed += fuzz.frames
        # The signal lands while every load client is still pipelining.
        if crash:
            executor.kill()
            status: int | None = -signal.SIGKILL
        else:
            status = executor.stop(signal.SIGTERM)
        for client in clients:
            client.join()
        for sock in held:
            sock.close()
        acked = [cid for client in clients for cid in client.acked_ids]
        self.figures.frames_sent += sum(client.frames_sent for client in clients) + fuzz.frames
        self.figures.acked += len(acked) + fuzz.frames
        for client in clients:
            if client.error:
                self.fail(f"cycle {cycle}: client {client.prefix}: {client.error}")
        if crash:
            print(f"cycle {cycle}: SIGKILL with {len(acked)} load frames acked", flush=True)
            return acked
        self.check_orderly_exit(cycle, executor, status, acked, fuzz, rows_before)
        return acked

    def check_orderly_exit(
        self,
        cycle: int,
        executor: ExecutorProcess,
        status: int | None,
        acked: list[str],
        fuzz: FuzzResult,
        rows_before: int,
    ) -> None:
        if status != 0:
            self.fail(f"cycle {cycle}: exit status {status} after SIGTERM")
            return
        try:
            counters = executor.counters()
        except ValueError as error:
            self.fail(f"cycle {cycle}: {error}")
            return
        self.figures.unacked += counters["unacked"]
        self.figures.dropped_ring_full += counters["dropped_ring_full"]
        self.figures.dropped_oversized_id += counters["dropped_oversized_id"]
        self.figures.dropped_write_failed += counters["dropped_write_failed"]
        for problem in identity_problems(counters):
            self.fail(f"cycle {cycle}: {problem}")
        new_rows = wake_recv_count(self.db_path) - rows_before
        if new_rows != counters["rows_written"]:
            self.fail(
                f"cycle {cycle}: {new_rows} new rows, rows_written {counters['rows_written']}"
            )
        delivered = counters["accepted"] - counters["unacked"]
        # Vanishing peers' acks may be delivered to nobody, so the clients can only see fewer.
        if len(acked) + fuzz.accepted > delivered:
            self.fail(f"cycle {cycle}: clients saw {len(acked)} acks, executor {delivered}")
        if counters["dropped_ring_full"] + counters["dropped_write_failed"] == 0:
            present = ids_with_prefix(self.db_path, f"c{cycle:04d}-")
            missing = sum(1 for cid in acked if cid not in present)
            if missing:
                self.fail(f"cycle {cycle}: {missing} acked frames have no row")
        print(
            f"cycle {cycle}: exit 0, {len(acked)} load acks, {fuzz.frames} fuzzed, "
            f"counters {counters}",
            flush=True,
        )


@contextlib.contextmanager
def _soak_directory() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="soak-"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scenarios.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, required=True, help="how long to keep cycling")
    parser.add_argument("--connections", type=int, default=4, help="load connections (default 4)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fuzz and the peers")
    parser.add_argument("--load-seconds", type=float, default=5.0, help="load per cycle (s)")
    parser.add_argument("--held", type=int, default=20, help="idle connections per cycle")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    with _soak_directory() as directory:
        soak = Soak(
            directory,
            connections=args.connections,
            seed=args.seed,
            load_s=args.load_seconds,
            held=args.held,
        )
        try:
            figures = soak.run(deadline)
        except Exception as error:  # a crash of the soak itself is a failure, reported as one
            soak.fail(f"soak aborted: {error!r}")
            figures = soak.figures
    print(f"soak: {(time.monotonic() - started) / 60:.1f} minutes, seed {args.seed}")
    for line in figures.lines():
        print(line)
    return 1 if figures.failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
