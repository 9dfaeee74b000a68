"""Latency runs: every (executor, client) configuration, R times, interleaved and rotated."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Final

from bench.clients.latency import BURST_KINDS
from bench.clients.reference_burst import REFERENCE_KINDS
from bench.experiments.components import time_components
from bench.harness.processes import (
    COMPLETION_TIMEOUT_S,
    BenchError,
    ExecutorSpec,
    RunningExecutor,
    pin_child,
    read_span_us,
    wait_for_rows,
)

CLIENT_SPANS: Final = {
    "blocking": "roundtrip",
    "asyncio": "wake_send",
    "trio": "wake_send",
    "burst-asyncio": "wake_send",
    "burst-uvloop": "wake_send",
    "reference-asyncio": "wake_send",
    "reference-uvloop": "wake_send",
}
"""The span each client kind measures from outside (the executor always adds ``wake_recv``)."""

BURST_CLIENTS: Final = (*BURST_KINDS, *REFERENCE_KINDS)
"""Clients that enqueue every frame back to back instead of one at a time (docs/performance/plan/
addenda 2026-11-30 and 2026-12-01); they also report the deepest queue and the burst's frames/s, and
the reference kinds the wakes their queue dropped (``lost``)."""

DEFAULT_BURST_CLIENTS: Final = BURST_KINDS
"""What ``--burst`` runs unless ``--clients`` says otherwise (the pre-registered pair)."""

CLIENT_TIMEOUT_S: Final = 600.0
"""Longest a latency client may run (s); 2200 paced frames take a second or two."""

COMPONENT_EXECUTOR: Final = "in-process"
COMPONENT_CLIENT: Final = "none"


@dataclasses.dataclass(frozen=True)
class Series:
    """The kept samples (microseconds) of one span in one run of one configuration."""

    run: int
    executor: str
    client: str
    span: str
    warmup: int
    samples_us: tuple[float, ...]
    figures: tuple[tuple[str, float], ...] = ()
    """Per-run figures a client reports besides its samples (burst: deepest_queue, frames_per_s)."""


def run_client(
    kind: str, socket_path: str, frames: int, out_path: str, cpus: frozenset[int] = frozenset()
) -> tuple[list[float], dict[str, float]]:
    """Run one latency client process to completion; its durations (µs) and figures.

    The figures are the JSON object a burst client prints last on stdout (empty for the others).
    A reference client times only the wakes its queue did not drop (``lost``).

    Raises:
        BenchError: the client failed or reported a different number of frames.
    """
    command = [sys.executable, "-m", "bench.clients.latency", kind, "--socket", socket_path]
    command += ["--frames", str(frames), "--out", out_path]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
        preexec_fn=pin_child(cpus),
    )
    if done.returncode != 0:
        raise BenchError(f"client {kind} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    with open(out_path, encoding="ascii") as lines:
        durations = [int(line) / 1000.0 for line in lines if line.strip()]
    figures: dict[str, float] = {}
    if kind in BURST_CLIENTS:
        try:
            figures = {k: float(v) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}
        except (IndexError, ValueError, AttributeError) as error:
            raise BenchError(f"client {kind} printed no figures: {error}") from None
    delivered = frames - int(figures.get("lost", 0))
    if len(durations) != delivered:
        raise BenchError(f"client {kind} timed {len(durations)} of {delivered} frames")
    return durations, figures


def run_configuration(
    spec: ExecutorSpec, client: str, run: int, warmup: int, iterations: int
) -> list[Series]:
    """Start the executor, drive it with one client, check completion, stop it, keep the samples.

    Raises:
        BenchError: lost frames or rows, a failed client, or an executor that exited badly.
    """
    frames = warmup + iterations
    directory = tempfile.mkdtemp(prefix="bench-")
    try:
        socket_path = os.path.join(directory, "x.sock")
        database_path = os.path.join(directory, "telemetry.db")
        with RunningExecutor(spec, socket_path, database_path) as executor:
            outside, figures = run_client(
                client, socket_path, frames, os.path.join(directory, "c.txt"), spec.client_cpus
            )
            # Every wake the client delivered has its row; a wake its queue dropped never left it.
            delivered = frames - int(figures.get("lost", 0))
            wait_for_rows(database_path, delivered, timeout=COMPLETION_TIMEOUT_S)
            status = executor.stop()
        if status != 0:
            raise BenchError(
                f"executor {spec.name} exited {status} after SIGTERM:"
                f" {executor.stderr_text.strip()[-400:]}"
            )
        inside = read_span_us(database_path)
        own = read_span_us(database_path, "wake_frame")  # none unless it runs --frame-spans
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if len(inside) != delivered:
        raise BenchError(f"{len(inside)} wake_recv rows for {delivered} frames after shutdown")
    series = [Series(run, spec.name, client, "wake_recv", warmup, tuple(inside[warmup:]))]
    if own:
        if len(own) != delivered:
            raise BenchError(f"{len(own)} wake_frame rows for {delivered} frames after shutdown")
        series.append(Series(run, spec.name, client, "wake_frame", warmup, tuple(own[warmup:])))
    return [
        *series,
        Series(
            run,
            spec.name,
            client,
            CLIENT_SPANS[client],
            warmup,
            tuple(outside[warmup:]),
            tuple(sorted(figures.items())),
        ),
    ]


def rotated(items: Sequence[tuple[ExecutorSpec, str]], run: int) -> list[tuple[ExecutorSpec, str]]:
    """Configuration order for run ``run`` (1-based): rotated by ``run - 1`` places."""
    shift = (run - 1) % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def run_all(
    executors: Sequence[ExecutorSpec],
    clients: Sequence[str],
    *,
    runs: int,
    warmup: int,
    iterations: int,
    components: bool,
    progress: Callable[[str], None],
) -> list[Series]:
    """Every configuration ``runs`` times, run 1 of all before run 2 of any; components per run."""
    configurations = [(spec, client) for spec in executors for client in clients]
    results: list[Series] = []
    total = runs * len(configurations)
    done = 0
    for run in range(1, runs + 1):
        for spec, client in rotated(configurations, run):
            progress(f"run {run}/{runs}: {spec.name} x {client} ({done}/{total} done)")
            results += run_configuration(spec, client, run, warmup, iterations)
            done += 1
        if components:
            progress(f"run {run}/{runs}: in-process components")
            for span, samples in time_components(warmup, iterations).items():
                results.append(
                    Series(run, COMPONENT_EXECUTOR, COMPONENT_CLIENT, span, warmup, tuple(samples))
                )
    return results
