"""Throughput mode: K pipelined connections per offered rate; accepted frames/s and telemetry drops.

Secondary to latency and never mixed with it: frames are pipelined, so no span is taken here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Final

from bench.harness.processes import (
    COMPLETION_TIMEOUT_S,
    POLL_INTERVAL_S,
    BenchError,
    ExecutorSpec,
    RunningExecutor,
    count_latency_rows,
    count_wake_recv,
    parse_counters,
    pin_child,
    read_span_us,
)
from bench.reports.stats import percentile

SETTLE_S: Final = 1.0
"""A row count unchanged this long (s) after the clients exit is taken as final."""


@dataclasses.dataclass(frozen=True)
class ThroughputResult:
    """One offered rate against one executor."""

    executor: str
    connections: int
    offered_rate: float
    sent: int
    acked: int
    rows_written: int
    seconds: float
    rows_seconds: float
    wake_recv_p50_us: float = 0.0
    """The executor's own ``wake_recv`` p50 over every row written (pipelined: batched frames)."""
    wake_recv_p99_us: float = 0.0

    @property
    def accepted_per_s(self) -> float:
        """Acked frames per second of the sending window."""
        return self.acked / self.seconds if self.seconds else 0.0

    @property
    def rows_per_s(self) -> float:
        """Rows committed per second, from the first frame until the count stopped growing."""
        return self.rows_written / self.rows_seconds if self.rows_seconds else 0.0

    @property
    def drops(self) -> int:
        """Acked frames with no row after an orderly shutdown (never hidden)."""
        return self.acked - self.rows_written

    def line(self) -> str:
        """One printed line."""
        rate = "flat out" if self.offered_rate <= 0 else f"{self.offered_rate:.0f}/s offered"
        return (
            f"{self.executor:>10} K={self.connections} {rate:>16}: accepted"
            f" {self.accepted_per_s:9.0f} frames/s, rows {self.rows_per_s:9.0f}/s,"
            f" sent={self.sent} acked={self.acked} rows_written={self.rows_written}"
            f" drops={self.drops}"
        )


def _settled_count(database_path: str, expected: int) -> tuple[int, float]:
    """Poll until the row count reaches ``expected`` or stops growing; (count, wall s when)."""
    deadline = time.monotonic() + COMPLETION_TIMEOUT_S
    last, changed, changed_wall = -1, time.monotonic(), time.time()
    while True:
        count = count_wake_recv(database_path)
        now = time.monotonic()
        if count != last:
            last, changed, changed_wall = count, now, time.time()
        if count >= expected or now - changed > SETTLE_S or now > deadline:
            return count, changed_wall
        time.sleep(POLL_INTERVAL_S)


def _first_stamp_s(database_path: str) -> float:
    """Wall-clock seconds of the earliest row's stamp (when the writer's work began)."""
    with contextlib.closing(sqlite3.connect(database_path, timeout=5.0)) as connection:
        (first_ms,) = connection.execute(
            "SELECT min(started_at_ms) FROM latency_events WHERE stage = 'wake_recv'"
        ).fetchone()
    return float(first_ms or 0) / 1000.0


def run_rate(
    spec: ExecutorSpec, connections: int, seconds: float, rate: float, batch: int = 1
) -> ThroughputResult:
    """One executor process, ``connections`` flood clients sharing ``rate`` (0 = flat out).

    Each client writes ``batch`` frames per ``sendall`` (1: one frame per write).

    Raises:
        BenchError: a client failed or the executor exited badly.
    """
    directory = tempfile.mkdtemp(prefix="bench-")
    try:
        socket_path = os.path.join(directory, "x.sock")
        database_path = os.path.join(directory, "telemetry.db")
        with RunningExecutor(spec, socket_path, database_path) as executor:
            per_connection = rate / connections if rate > 0 else 0.0
            command = [sys.executable, "-m", "bench.clients.latency", "flood"]
            command += ["--socket", socket_path]
            command += ["--seconds", str(seconds), "--rate", str(per_connection)]
            command += ["--batch", str(batch)]
            clients = [
                subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    text=True,
                    preexec_fn=pin_child(spec.client_cpus),
                )
                for _ in range(connections)
            ]
            reports = []
            for client in clients:
                out, _ = client.communicate(timeout=seconds + 120.0)
                if client.returncode != 0:
                    raise BenchError(f"flood client exited {client.returncode}")
                reports.append(json.loads(out))
            acked = sum(int(r["acked"]) for r in reports)
            _, settled_at = _settled_count(database_path, acked)
            # Rows per second from the first frame's stamp (not from spawning the clients).
            first_stamp = _first_stamp_s(database_path) or settled_at
            status = executor.stop()
        if status != 0:
            raise BenchError(f"executor {spec.name} exited {status}: {executor.stderr_text[-400:]}")
        counters = parse_counters(executor.stderr_text)
        rows = count_wake_recv(database_path)
        spans = sorted(read_span_us(database_path)) if rows else [0.0]
        all_rows = count_latency_rows(database_path)  # stage rows too, with an exchange
        if "rows_written" in counters and counters["rows_written"] != all_rows:
            raise BenchError(
                f"executor says rows_written={counters['rows_written']}, table {all_rows}"
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return ThroughputResult(
        executor=spec.name,
        connections=connections,
        offered_rate=rate,
        sent=sum(int(r["sent"]) for r in reports),
        acked=acked,
        rows_written=rows,
        seconds=max(float(r["elapsed_s"]) for r in reports),
        rows_seconds=settled_at - first_stamp,
        wake_recv_p50_us=percentile(spans, 0.5),
        wake_recv_p99_us=percentile(spans, 0.99),
    )


def sweep(
    executors: Sequence[ExecutorSpec],
    connections: int,
    seconds: float,
    rates: Sequence[float],
    progress: Callable[[str], None],
) -> list[str]:
    """Every executor at every offered rate; the printed lines, with the best zero-drop rate."""
    lines = []
    for spec in executors:
        best: float | None = None
        for rate in rates:
            progress(f"throughput: {spec.name} at {rate or 'flat out'}")
            result = run_rate(spec, connections, seconds, rate)
            lines.append(result.line())
            if result.drops == 0 and (best is None or (best > 0 and (rate <= 0 or rate > best))):
                best = rate
        if best is None:
            verdict = "none of the offered rates"
        elif best <= 0:
            verdict = "flat out (every offered rate, saturation included)"
        else:
            verdict = f"{best:.0f} frames/s"
        lines.append(f"{spec.name:>10}: highest offered rate with zero drops: {verdict}")
    return lines
