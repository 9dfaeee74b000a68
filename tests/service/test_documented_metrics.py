"""What docs/operations/monitoring.md says ``--metrics`` serves is what a live endpoint serves,
name for name.

An alert or a query written from the documentation must match something: every metric name the
document writes out, every counter of the exit lines (which it promises as
``trio_executor_<counter>_total``) and every ``stage`` it lists is looked for in a scrape of a real
executor that has placed an order and measured a shadow fire.
"""

from __future__ import annotations

import re
import signal
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from executor.clock import clock_domain
from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters, metrics_port, request_all

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations" / "monitoring.md"

METRIC_NAME = re.compile(r"\btrio_executor_[a-z0-9_]*[a-z0-9](?![a-z0-9_])")
"""A metric name written out whole (a pattern such as ``trio_executor_<counter>_total`` is not)."""

SCRAPE_DEADLINE_S = 30.0
"""Longest wait for the order's rows to reach the histograms (seconds), on a loaded machine."""


def documented_names(text: str) -> set[str]:
    """Every whole metric name in ``text``, with the ``{label=...}`` part left off."""
    return set(METRIC_NAME.findall(text))


def documented_stages(text: str) -> set[str]:
    """The ``stage`` values the histogram's row of the metrics table lists."""
    (row,) = [line for line in text.splitlines() if "`trio_executor_latency_seconds" in line]
    listed = row.split("|")[3].split("buckets")[0]  # what follows is how to query it
    return set(re.findall(r"`([a-z_]+)`", listed))


def scrape(port: int) -> tuple[set[str], set[str]]:
    """The series names served (as a query matches them: a counter's with ``_total``; a
    family name without it matches nothing) and the ``stage`` label values."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    names: set[str] = set()
    stages: set[str] = set()
    for family in text_string_to_metric_families(text):
        if family.type == "histogram":  # queried by its family name's _bucket, _sum, _count
            names.add(family.name)
        for sample in family.samples:
            names.add(sample.name)
            if "stage" in sample.labels:
                stages.add(sample.labels["stage"])
    return names, stages


def test_the_pattern_sees_whole_names_only() -> None:
    """The name pattern finds written-out names and skips the patterns (the check can fail)."""
    text = "`trio_executor_reconciled`, `trio_executor_<counter>_total`, `trio_executor_x_total{a}`"
    assert documented_names(text) == {"trio_executor_reconciled", "trio_executor_x_total"}


def test_every_metric_the_operations_guide_names_is_served(
    spawner: Spawner, short_dir: Path
) -> None:
    """Each metric name the guide writes, each exit-line counter as ``..._total``, and each
    stage its histogram row lists is in a live scrape."""
    socket_path = short_dir / "x.sock"
    executor = spawner.serve(
        socket_path,
        short_dir / "t.db",
        *("--metrics", "127.0.0.1:0", "--log-format", "json", "--exchange", "fake"),
    )
    same_clock = {"recv_ns": time.perf_counter_ns(), "clock_domain": clock_domain()}
    wakes = [
        make_wake("doc-real", exchange_index=0, **same_clock),
        make_wake("doc-shadow", exchange_index=0, dry_run=True, **same_clock),
    ]
    assert [ack.status for ack in request_all(socket_path, wakes)] == ["accepted"] * 2
    text = OPERATIONS.read_text()
    wanted_stages = documented_stages(text)
    port = metrics_port(executor)
    deadline = time.monotonic() + SCRAPE_DEADLINE_S
    while not wanted_stages <= (served := scrape(port))[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    names, stages = served
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    server, telemetry = exit_counters(executor.stderr_lines())
    promised = {f"trio_executor_{key}_total" for key in server}
    promised |= {f"trio_executor_telemetry_{key}_total" for key in telemetry}
    written = documented_names(text)
    promised -= {f"{name}_total" for name in written}  # a state (0/1), documented as a gauge
    assert len(written) >= 6, written
    assert sorted(written - names) == []
    assert sorted(promised - names) == []
    assert sorted(wanted_stages - stages) == []
    assert {"wake_recv", "detect_wire", "dispatch_wire"} <= wanted_stages
