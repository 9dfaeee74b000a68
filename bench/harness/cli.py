"""``python -m bench``: the command line of the benchmark harness."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from bench.clients.fire import FirePlan
from bench.harness.background import BackgroundLoad
from bench.harness.placement import default_placements, placed_all
from bench.harness.processes import BenchError, ExecutorSpec, executor_spec
from bench.harness.runner import BURST_CLIENTS, CLIENT_SPANS, DEFAULT_BURST_CLIENTS, Series, run_all
from bench.reports.fire import fire_lines
from bench.reports.fire_path import breakdown_lines
from bench.reports.output import (
    RATIO_HEADER,
    append_history,
    machine_facts,
    summary_lines,
    write_plot,
    write_samples,
    write_summary,
)
from bench.scenarios.burst import (
    burst_lines,
    single_connection_throughput,
    throughput_lines,
    write_burst,
    write_throughput,
)
from bench.scenarios.fire import FIRE_STAGES, FireRunFacts, run_fire_all
from bench.scenarios.saturation import (
    RELIABILITY_RATE,
    run_saturation,
    saturation_lines,
    write_saturation,
)
from bench.scenarios.throughput import sweep

DEFAULT_HISTORY: Final = Path("bench/history.csv")
DEFAULT_RESULTS: Final = Path("bench/results")

DESCRIPTION: Final = """\
Latency benchmark of wake executors, each started as its own process with
--socket PATH --telemetry-db PATH and stopped with SIGTERM, driven by clients in
other processes, one frame at a time (the next frame waits for the previous ack).

Spans (microseconds): wake_recv (executor: body read returned -> ack write returned,
read from its own latency_events rows; with its acks joined, the later frames' work and
the joined send too), wake_frame (an executor started with --frame-spans: body read
returned -> its own ack encoded, no send), roundtrip (blocking client: before the write
-> whole ack read), wake_send (poller: sent_at_ns before enqueue -> write/drain
returned; never waits for the ack), decode, encode_ack, sign (in-process loops).

Each configuration (executor x client) runs --runs times, interleaved and rotated;
--warmup frames are discarded, --iterations kept; percentiles p50/p90/p99 by the
type-7 estimator (bench.reports.stats.percentile). A run whose wake_recv row count differs
from the frames sent is an error (non-zero exit). Prints one line per configuration
and span (median across runs, with min/median/max across runs; n; warm-up; runs),
then the ratios of each executor's wake_recv and roundtrip median p50 to trio's.
Writes summary.csv, samples.csv, machine.txt and (with matplotlib) cdf.png to --out
and appends to --history. The plan and its confounds: docs/performance/plan/.

--burst: the burst scenario (docs/performance/plan/ addendum 2026-11-30). Clients burst-asyncio
and burst-uvloop (the reference poller's shape on each loop) enqueue warmup+iterations
wakes back to back, sleep(0) between enqueues, never waiting for an ack; wake_send =
enqueue -> drain returned. Prints and writes burst.csv (p50/p90/p99/max, deepest queue,
frames/s per run), then one flat-out flood connection per executor and run for
--seconds (throughput.csv: acked frames/s, drops).

--fire adds the fire path (--fire-only runs it alone): one fake exchange process
(python -m executor.fake) per invocation, every executor pointed at it
through the reference's KALSHI_* variables (risk limits raised so the gate never
refuses), a fire client sending quiet shadow and real wakes and shadow bursts
with one real wake in the middle. Spans order_build, sign, dispatch_send,
dispatch_ack, detect_fire (client recv_ns -> executor's sent stamp), read from
the executor's own rows; the client column carries the kind (fire:shadow,
fire:real, burst:shadow, burst:real). Also writes fire-cdf.png; fire rows are
not appended to --history. See docs/performance/plan/, addendum 2026-11-30.

--placement unpinned,pinned (default both): each executor is run as is and pinned
(its process on CPU 1, every client process on CPU 0, set before exec like
taskset), interleaved in every run; a pinned executor's name ends in @pinned.
--saturation: clients pipelining 64-frame writes for --seconds, one connection flat
out and four connections at --saturation-rate (40,000) frames/s in all; acked/s, rows/s, drops
(saturation.csv). See docs/performance/plan/, addendum 2026-12-01.
--background-load N: N processes spinning on the CPUs from before the first run until
after the last, in every mode; named in the output and machine.txt (contention as
a configuration, issue 24)."""


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _rates(text: str) -> list[float]:
    return [float(value) for value in _names(text)]


def build_parser() -> argparse.ArgumentParser:
    """Every flag, documented in ``--help``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--executors",
        type=_names,
        default=["trio", "asyncio", "uvloop"],
        help="comma list of trio (python -m executor serve), asyncio and uvloop (the"
        " bench.baselines.executor executor), cmd:COMMAND (any binary taking --socket and"
        " --telemetry-db); default trio,asyncio,uvloop",
    )
    parser.add_argument(
        "--clients",
        type=_names,
        default=None,
        help="comma list of blocking (roundtrip), asyncio (reference-shaped poller,"
        " wake_send), trio (Trio poller, wake_send), burst-asyncio and burst-uvloop (burst"
        " poller, wake_send), reference-asyncio and reference-uvloop (the burst under the"
        " reference poller's queue bound and drop policy: counts lost wakes); default"
        " blocking,asyncio (with --burst: the two burst clients)",
    )
    parser.add_argument("--iterations", type=int, default=2000, help="kept samples (2000)")
    parser.add_argument("--warmup", type=int, default=200, help="discarded warm-up (200)")
    parser.add_argument("--runs", type=int, default=5, help="runs per configuration (5)")
    parser.add_argument(
        "--components",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time decode, encode_ack and sign in-process each run (default on;"
        " --no-components to skip)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for summary.csv, samples.csv, machine.txt and the PNG"
        " (default bench/results/<UTC timestamp>/)",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=DEFAULT_HISTORY,
        help="CSV appended per run x configuration, never rewritten (bench/history.csv)",
    )
    parser.add_argument("--no-history", action="store_true", help="do not append to --history")
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="instead of latency: K pipelined connections per offered rate; reports accepted"
        " frames/s, telemetry rows/s, drops and the highest zero-drop rate",
    )
    parser.add_argument(
        "--burst",
        action="store_true",
        help="the burst scenario: burst clients, burst.csv, one-connection flat-out throughput",
    )
    parser.add_argument(
        "--placement",
        type=_names,
        default=default_placements(),
        help="comma list of unpinned and pinned (executor on CPU 1, clients on CPU 0);"
        " every executor runs under each (default unpinned,pinned; unpinned alone on a"
        " machine without CPUs 0 and 1)",
    )
    parser.add_argument(
        "--saturation",
        action="store_true",
        help="only the saturation scenario: 64-frame pipelined writes, one connection flat out"
        " and four at --saturation-rate frames/s in all; acked/s, rows/s, drops (saturation.csv)",
    )
    parser.add_argument(
        "--saturation-rate",
        type=float,
        default=RELIABILITY_RATE,
        metavar="FRAMES_PER_S",
        help="saturation: frames/s offered in all by the four-connection load"
        f" ({RELIABILITY_RATE:.0f}; issue 24's contention target is 20000)",
    )
    parser.add_argument("--connections", type=int, default=4, help="throughput: K (4)")
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="throughput: sending window per rate (3)"
    )
    parser.add_argument(
        "--rates",
        type=_rates,
        default=[1000.0, 2000.0, 5000.0, 10000.0, 0.0],
        help="throughput: comma list of total offered frames/s, 0 = flat out"
        " (1000,2000,5000,10000,0)",
    )
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="N processes spinning (a pure-Python busy loop, unpinned) during every run of the"
        " invocation, named in the output and machine.txt (0)",
    )
    fire = parser.add_argument_group("fire path (docs/performance/plan/, addendum 2026-11-30)")
    fire.add_argument("--fire", action="store_true", help="add the fire-path scenarios")
    fire.add_argument(
        "--fire-only", action="store_true", help="run only the fire-path scenarios (no latency)"
    )
    fire.add_argument(
        "--fire-warmup", type=int, default=FirePlan.warmup, help="discarded shadow and real (20)"
    )
    fire.add_argument("--fire-shadow", type=int, default=FirePlan.shadow, help="kept shadow (500)")
    fire.add_argument("--fire-real", type=int, default=FirePlan.real, help="kept real (100)")
    fire.add_argument(
        "--fire-bursts",
        type=int,
        default=FirePlan.bursts,
        help="bursts of 200 shadow wakes with one real in the middle (10)",
    )
    fire.add_argument(
        "--fire-burst-real-apart",
        action="store_true",
        help="each burst's real wake on a second connection, written once the burst's shadows"
        " are all acked (the first connection then starting the shadows it held)",
    )
    return parser


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\x1b[K{message}", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 on success, 1 on a run that is an error, 2 on bad flags."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        executors = placed_all([executor_spec(name) for name in args.executors], args.placement)
    except BenchError as error:
        parser.error(str(error))
    if args.clients is None:
        args.clients = list(DEFAULT_BURST_CLIENTS) if args.burst else ["blocking", "asyncio"]
    unknown = [client for client in args.clients if client not in CLIENT_SPANS]
    if unknown:
        known = ", ".join(CLIENT_SPANS)
        parser.error(f"unknown client(s) {', '.join(unknown)} ({known})")
    if args.iterations < 1 or args.warmup < 0 or args.runs < 1:
        parser.error("--iterations and --runs must be >= 1, --warmup >= 0")
    if min(args.fire_warmup, args.fire_shadow, args.fire_real, args.fire_bursts) < 0:
        parser.error("--fire-warmup, --fire-shadow, --fire-real and --fire-bursts must be >= 0")
    if args.connections < 1 or args.seconds <= 0:
        parser.error("--connections must be >= 1 and --seconds > 0")
    if args.background_load < 0:
        parser.error("--background-load must be >= 0")
    if args.saturation_rate <= 0:
        parser.error("--saturation-rate must be > 0")
    with BackgroundLoad(args.background_load) as background:
        return _run(args, executors, argv, background.description)


def _run(
    args: argparse.Namespace,
    executors: list[ExecutorSpec],
    argv: list[str] | None,
    background: str,
) -> int:
    """Everything after the flags are checked, while the background load (if any) spins."""
    stamp = datetime.now(UTC)
    load_start = os.getloadavg()
    command = ["python -m bench", *(argv if argv is not None else sys.argv[1:])]
    try:
        if args.throughput:
            lines = sweep(executors, args.connections, args.seconds, args.rates, _progress)
            _progress("")
            print("\n".join(lines))
            print(f"background load: {background}")
            return 0
        if args.saturation:
            saturated = run_saturation(
                executors, args.runs, args.seconds, _progress, args.saturation_rate
            )
            _progress("")
            out = args.out or DEFAULT_RESULTS / stamp.strftime("%Y%m%dT%H%M%SZ")
            out.mkdir(parents=True, exist_ok=True)
            write_saturation(out / "saturation.csv", saturated)
            (out / "machine.txt").write_text(
                machine_facts(load_start, command, background), encoding="utf-8"
            )
            print("\n".join(saturation_lines(saturated)))
            print(f"background load: {background}")
            print(f"results: {out}")
            return 0
        series: list[Series] = []
        if not args.fire_only:
            series = run_all(
                executors,
                args.clients,
                runs=args.runs,
                warmup=args.warmup,
                iterations=args.iterations,
                components=args.components,
                progress=_progress,
            )
        flood = (
            single_connection_throughput(executors, args.runs, args.seconds, _progress)
            if args.burst and not args.fire_only
            else []
        )
        fire_series: list[Series] = []
        fire_facts: list[FireRunFacts] = []
        if args.fire or args.fire_only:
            plan = FirePlan(
                args.fire_warmup,
                args.fire_shadow,
                args.fire_real,
                args.fire_bursts,
                burst_real_apart=args.fire_burst_real_apart,
            )
            fire_series, fire_facts = run_fire_all(
                executors, runs=args.runs, plan=plan, progress=_progress
            )
    except BenchError as error:
        _progress("")
        print(f"bench: ERROR: {error}", file=sys.stderr)
        return 1
    _progress("")
    out = args.out or DEFAULT_RESULTS / stamp.strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    write_summary(out / "summary.csv", [*series, *fire_series])
    write_samples(out / "samples.csv", [*series, *fire_series])
    (out / "machine.txt").write_text(
        machine_facts(load_start, command, background), encoding="utf-8"
    )
    if series:
        print("\n".join(summary_lines(series)))
        if args.burst or any(client in BURST_CLIENTS for client in args.clients):
            # A reference client's lost wakes are only in these lines and burst.csv.
            write_burst(out / "burst.csv", series)
            print("\n".join(burst_lines(series)))
        if args.burst:
            write_throughput(out / "throughput.csv", flood)
            print("\n".join(throughput_lines(flood)))
        print(write_plot(out / "cdf.png", series))
    if fire_series:
        lines = summary_lines(fire_series)
        # The wake_recv/roundtrip ratio block means nothing for fire spans: fire_lines replaces it.
        print("\n".join(line for line in lines[: lines.index(RATIO_HEADER)]))
        print("\n".join(fire_lines(fire_series, fire_facts)))
        print("\n".join(breakdown_lines(fire_series)))
        stage_series = [item for item in fire_series if item.span in FIRE_STAGES]
        print(write_plot(out / "fire-cdf.png", stage_series, FIRE_STAGES))
    if series and not args.no_history:
        if args.background_load:
            # history.csv has no column for it: a loaded run's rows would pass for quiet ones.
            print("history: not appended (runs under a background load)")
        else:
            rows = append_history(args.history, series, stamp)
            print(f"history: {rows} rows appended to {args.history}")
    print(f"background load: {background}")
    print(f"results: {out}")
    return 0
