"""Fire-path runs (``python -m bench --fire``): one fake exchange, every executor pointed at it.

The harness starts one ``python -m executor.fake`` process per invocation
(``bench.harness.fake_process``) and hands every executor the reference's variables for it (real
mode: the same code that would talk to Kalshi), with risk limits raised so the gate never refuses
while its arithmetic still runs. A fire client (``bench.clients.fire``) sends the quiet and
shadow-burst phases; the executor's own ``latency_events`` stage rows are read back and become
``Series`` whose ``client`` is the kind (``fire:shadow``, ``fire:real``, ``burst:shadow``,
``burst:real``) and whose ``span`` is exactly the stage name; the comparisons printed from them are
``bench.reports.fire``'s. Method and spans: docs/performance/plan/, addendum 2026-11-30.
"""

from __future__ import annotations

import collections
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
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from bench.clients.fire import (
    KIND_OF_PHASE,
    REAL_PHASES,
    FirePlan,
    phase_of,
    read_client_stamps,
)
from bench.harness.fake_process import FakeExchangeInfo, FakeExchangeProcess
from bench.harness.processes import (
    COMPLETION_TIMEOUT_S,
    POLL_INTERVAL_S,
    BenchError,
    ExecutorSpec,
    RunningExecutor,
    parse_counters,
    pin_child,
)
from bench.harness.runner import Series, rotated
from bench.scenarios.fire_path import SEGMENT_PREFIX, SEGMENTS, segments_of

READ_STAGES: Final = (
    "order_build",
    "sign",
    "dispatch_send",
    "dispatch_ack",
    "detect_fire",
    "dispatch_wire",
    "detect_wire",
)
"""The stage rows read back (DISPATCH.md §6 and §10's two spans to the wire), in path order."""
WIRE_ACK: Final = "wire_ack"
"""A derived series, not a row: per fire, ``dispatch_ack - dispatch_wire`` (the round trip from
the request's last byte on the wire to the whole response read), both rows of one fire."""
FIRE_STAGES: Final = (*READ_STAGES, WIRE_ACK)
"""Every series a fire run reports, in path order."""
KINDS: Final = ("fire:shadow", "fire:real", "burst:shadow", "burst:real")
PATH_SPANS: Final = tuple(SEGMENT_PREFIX + segment for segment, _ in SEGMENTS)
"""The path breakdown's series (``bench.scenarios.fire_path``), after the stages."""

RISK_LIMIT_NO_REFUSAL: Final = "1000000000"
"""Every risk limit during a run: far above anything a run can reach, so nothing is refused."""
FIRE_CLIENT_TIMEOUT_S: Final = 900.0
"""Longest a fire client may run (s); the default plan takes about 30 s."""

GROUP_LIMIT_NO_TRIGGER: Final = "1000000"
"""The order group's contracts limit during a run (the most the setting takes): every real order
still goes into the run's group, as in production, but a run's hundreds of orders never reach the
limit that would make the exchange trigger it (the default, 50 per 15 s, stops a run at ~50)."""

RISK_VARIABLES: Final = (
    "KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_DAY",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_TICKER_PER_DAY",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_EVENT_PER_DAY",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_CORRELATION_GROUP_PER_DAY",
    "KALSHI_RISK_MAX_NOTIONAL_PER_DAY_DOLLARS",
    "KALSHI_RISK_MAX_CONCURRENT_DISPATCHES",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_EVENT",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_CORRELATION_GROUP",
)

SELECT_STAGE_ROWS: Final = (
    "SELECT correlation_id, stage, duration_ms, metadata_json FROM latency_events"
    " WHERE stage IN ('order_build', 'sign', 'dispatch_send', 'dispatch_ack', 'detect_fire',"
    " 'dispatch_wire', 'detect_wire')"
    " ORDER BY id"
)


def fire_environment(info: FakeExchangeInfo, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` plus the reference's variables pointing an executor at the fake (real mode)."""
    env = {key: value for key, value in base.items() if not key.startswith("KALSHI_")}
    env.update(
        KALSHI_API_KEY_ID=info.key_id,
        KALSHI_PRIVATE_KEY_PATH=info.private_key_path,
        KALSHI_DEMO_BASE_URL=info.base_url,
        KALSHI_CA_FILE=info.ca_file,
        KALSHI_ENVIRONMENT="demo",
        KALSHI_ALLOWED_EXCHANGE_INDEXES="0",
        KALSHI_RISK_GATE_ENABLED="true",
        KALSHI_RISK_REFIRE_COOLDOWN_SECONDS="0",
        KALSHI_KELLY_FRACTION="0",
        KALSHI_FIXED_ORDER_CONTRACT_COUNT="1",
        KALSHI_ORDER_GROUP_CONTRACTS_LIMIT=GROUP_LIMIT_NO_TRIGGER,
    )
    env.update({name: RISK_LIMIT_NO_REFUSAL for name in RISK_VARIABLES})
    return env


@dataclasses.dataclass(frozen=True)
class StageRow:
    """One stage row as read back."""

    phase: str
    stage: str
    duration_us: float
    dry_run: bool | None
    correlation_id: str = ""
    path_us: dict[str, float] | None = None
    """A ``detect_wire`` row's path stamps (µs after ``recv_ns``), when its metadata has them."""


def read_stage_rows(database_path: str) -> list[StageRow]:
    """Every fire-client stage row in ``id`` order (rows of other correlation ids are ignored)."""
    if not os.path.exists(database_path):
        return []
    with contextlib.closing(sqlite3.connect(database_path, timeout=5.0)) as connection:
        try:
            rows = connection.execute(SELECT_STAGE_ROWS).fetchall()
        except sqlite3.OperationalError:
            return []
    found = []
    for correlation_id, stage, duration_ms, metadata in rows:
        phase = phase_of(str(correlation_id))
        if phase is None:
            continue
        try:
            parsed = json.loads(metadata) if metadata else {}
            dry_run = parsed.get("dry_run")
            path = parsed.get("path_us")
        except (ValueError, AttributeError):
            dry_run = path = None
        found.append(
            StageRow(
                phase,
                stage,
                float(duration_ms) * 1000.0,
                dry_run,
                str(correlation_id),
                path if isinstance(path, dict) else None,
            )
        )
    return found


def completion_counts(rows: Sequence[StageRow]) -> dict[str, int]:
    """Per phase, the count that completion compares: ``order_build`` for burst shadows (a skipped
    shadow fire writes nothing else), ``detect_fire`` for every other phase."""
    counts: collections.Counter[str] = collections.Counter()
    for row in rows:
        wanted = "order_build" if row.phase == "burstshadow" else "detect_fire"
        if row.stage == wanted:
            counts[row.phase] += 1
    return dict(counts)


def wait_for_fire_rows(database_path: str, plan: FirePlan, timeout: float) -> list[StageRow]:
    """Poll until every phase's completion count is exactly what the plan sent.

    Raises:
        BenchError: a count passed its expectation, or the deadline passed short of one.
    """
    expected = plan.expected()
    deadline = time.monotonic() + timeout
    while True:
        rows = read_stage_rows(database_path)
        counts = completion_counts(rows)
        over = {p: counts[p] for p in counts if counts[p] > expected.get(p, 0)}
        if over:
            raise BenchError(f"more fire rows than wakes sent: {over} (expected {expected})")
        if all(counts.get(phase, 0) == count for phase, count in expected.items()):
            return rows
        if time.monotonic() > deadline:
            short = {
                p: f"{counts.get(p, 0)}/{n}" for p, n in expected.items() if counts.get(p, 0) != n
            }
            raise BenchError(
                f"fire rows short after {timeout} s: {short}; this run is an error, not a result"
            )
        time.sleep(POLL_INTERVAL_S * 5)


@dataclasses.dataclass(frozen=True)
class FireRunFacts:
    """Per configuration and run, what is printed beside the percentiles."""

    run: int
    executor: str
    burst_shadows_sent: int
    burst_shadows_signed: int


def series_of(
    rows: Sequence[StageRow],
    run: int,
    executor: str,
    warmup: int,
    client_stamps: Mapping[str, tuple[float, float]] | None = None,
) -> list[Series]:
    """Kept rows grouped by kind and stage, in row order, then each real fire's path segments
    (``bench.scenarios.fire_path``; spans ``path:<segment>``) where the client's stamps and the
    ``detect_wire`` row's path are both there.

    Raises:
        BenchError: a row whose ``dry_run`` contradicts the kind its correlation id names.
    """
    grouped: dict[tuple[str, str], list[float]] = {}
    wire_of: dict[str, float] = {}
    for row in rows:
        should_be_dry = row.phase not in REAL_PHASES
        if row.dry_run is not should_be_dry:
            raise BenchError(f"{row.stage} row of phase {row.phase} has dry_run={row.dry_run}")
        kind = KIND_OF_PHASE.get(row.phase)
        if kind is not None:
            grouped.setdefault((kind, row.stage), []).append(row.duration_us)
        if row.stage == "dispatch_wire":
            wire_of[row.correlation_id] = row.duration_us
        if kind is not None and row.path_us is not None and client_stamps is not None:
            segments = segments_of(row.path_us, client_stamps.get(row.correlation_id))
            for segment, duration_us in (segments or {}).items():
                grouped.setdefault((kind, SEGMENT_PREFIX + segment), []).append(duration_us)
    for row in rows:  # the derived round trip, for fires that have both rows
        kind = KIND_OF_PHASE.get(row.phase)
        if kind is not None and row.stage == "dispatch_ack" and row.correlation_id in wire_of:
            wire_ack = row.duration_us - wire_of[row.correlation_id]
            grouped.setdefault((kind, WIRE_ACK), []).append(wire_ack)
    series = []
    for kind in KINDS:
        kind_warmup = warmup if kind.startswith("fire:") else 0
        for stage in (*FIRE_STAGES, *PATH_SPANS):
            samples = grouped.get((kind, stage))
            if samples:
                series.append(Series(run, executor, kind, stage, kind_warmup, tuple(samples)))
    return series


def run_fire_configuration(
    spec: ExecutorSpec, run: int, plan: FirePlan, env: Mapping[str, str]
) -> tuple[list[Series], FireRunFacts]:
    """Start the executor against the fake, drive it with the fire client, read its stage rows.

    Raises:
        BenchError: a failed client, missing or extra rows, dispatch errors, a bad exit.
    """
    directory = tempfile.mkdtemp(prefix="bench-fire-")
    try:
        socket_path = os.path.join(directory, "x.sock")
        database_path = os.path.join(directory, "telemetry.db")
        with RunningExecutor(spec, socket_path, database_path, env=env) as executor:
            stamps_path = os.path.join(directory, "client-stamps.csv")
            command = [sys.executable, "-m", "bench.clients.fire", "--socket", socket_path]
            command += ["--stamps", stamps_path]
            done = subprocess.run(
                command + plan.argv(),
                capture_output=True,
                text=True,
                timeout=FIRE_CLIENT_TIMEOUT_S,
                preexec_fn=pin_child(spec.client_cpus),
            )
            if done.returncode != 0:
                raise BenchError(
                    f"fire client exited {done.returncode}: {done.stderr.strip()[-400:]}"
                )
            client_stamps = read_client_stamps(stamps_path)
            rows = wait_for_fire_rows(database_path, plan, COMPLETION_TIMEOUT_S)
            status = executor.stop()
        if status != 0:
            raise BenchError(
                f"executor {spec.name} exited {status} after SIGTERM:"
                f" {executor.stderr_text.strip()[-400:]}"
            )
        errors = parse_counters(executor.stderr_text).get("dispatch_errors", 0)
        if errors:
            raise BenchError(
                f"executor {spec.name} reported dispatch_errors={errors}:"
                f" {executor.stderr_text.strip()[-400:]}"
            )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    signed = sum(1 for row in rows if row.phase == "burstshadow" and row.stage == "sign")
    facts = FireRunFacts(run, spec.name, plan.expected()["burstshadow"], signed)
    return series_of(rows, run, spec.name, plan.warmup, client_stamps), facts


def run_fire_all(
    executors: Sequence[ExecutorSpec],
    *,
    runs: int,
    plan: FirePlan,
    progress: Callable[[str], None],
) -> tuple[list[Series], list[FireRunFacts]]:
    """Every executor ``runs`` times against one fake exchange, interleaved and rotated."""
    series: list[Series] = []
    facts: list[FireRunFacts] = []
    with FakeExchangeProcess() as fake:
        env = fire_environment(fake.info, os.environ)
        pairs = [(spec, "fire") for spec in executors]
        for run in range(1, runs + 1):
            for spec, _ in rotated(pairs, run):
                progress(f"fire run {run}/{runs}: {spec.name}")
                fake.place(spec.client_cpus)
                found, fact = run_fire_configuration(spec, run, plan, env)
                series += found
                facts.append(fact)
    return series, facts
