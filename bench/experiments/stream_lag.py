"""From a resting order's fill on the fake to its row and the risk gate, by the stream alone.
``python -m bench.experiments.stream_lag``.

Experiment, not product (docs/performance/notebook/, 2026-12-02). Issue 22's test reads "a resting
order filled on the fake reaches its row and the risk gate within 100 ms, with the account poll
disabled"; the suite proves the path (``tests/service/test_stream_e2e.py``) and asserts no time.
Here the executor's own order path (``executor.trading.assembly.open_order_path``: its stream on,
the account poll held off for an hour after its first poll, telemetry committing to SQLite, the
product's logging to a file) trades good_till_canceled orders against the in-process fake exchange
over TLS. Per sample: one real wake whose order rests on the fake and is followed; a pause for
quiet; then the fake fills it (``fill_resting``), after ``t0 = perf_counter_ns()``, and three
moments are stamped:

- ``gate``: the risk gate told of the fill (the ledger keeper's fill recorder, wrapped; told at
  the merge, before the row is written);
- ``queued``: the corrected row handed to telemetry (the ledger keeper's row sink, wrapped);
- ``committed``: the writer thread's commit of the batch holding that row (``write_batch``,
  wrapped), which includes the consumer's linger (``BATCH_LINGER_S``, 10 ms) by design.

The product's own ``stream_row`` row of each fill (the fill's ``ts_ms``, whole ms, to queued) is
read back beside them. The fake shares the executor's process, thread and loop (as ``--exchange
fake`` runs it): its bookkeeping, its message and its TLS send are inside every figure, which
therefore bound the executor's own part from above. ``--runs`` fresh executors and fakes, one after
the other; the load average is printed before and after each; ``--out`` keeps every sample.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import functools
import logging
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final
from unittest import mock

import orjson
import trio

import executor.exchange.follow.account as account_module
import executor.recording.consumer as consumer_module
from bench.clients.frames import in_process_wake
from bench.reports.stats import percentile
from executor.config.book import MAX_ORDER_GROUP_CONTRACTS_LIMIT, BookSettings
from executor.config.settings import ExchangeSettings, Settings
from executor.config.sizing import SizingConfig
from executor.decide.risk import RiskLimits
from executor.exchange.follow.reconcile_terms import FillRecorder, OrderRowSink
from executor.fake.exchange import FakeCredentials, FakeExchange, serve_fake_exchange
from executor.logs import start_logging, stop_logging
from executor.recording.rows import OrderRow, OrderStatus, TelemetryRow
from executor.recording.sqlite_writer import BatchOutcome, write_batch
from executor.telemetry import serve_telemetry
from executor.trading.assembly import open_order_path

SPANS: Final = ("gate", "queued", "committed", "stream_row")
BOUND_MS: Final = 100.0
"""The issue's bound (ms)."""
QUIET_S: Final = 0.1
"""Pause between an order resting and its fill (seconds): its own rows committed, its stream
messages read; it also keeps the orders under the write bucket's 10 a second."""
SAMPLE_TIMEOUT_S: Final = 10.0
"""Hang guard for one sample (seconds); never a measurement."""
NO_LIMIT: Final = RiskLimits(
    max_attempts_per_hour=10**9,
    max_attempts_per_day=10**9,
    max_attempts_per_ticker_per_day=10**9,
    max_attempts_per_event_per_day=10**9,
    max_attempts_per_correlation_group_per_day=10**9,
    max_notional_per_day_dollars=1e12,
    max_concurrent_dispatches=2,
    max_position_contracts_per_ticker=1e12,
    max_position_contracts_per_event=1e12,
    max_position_contracts_per_correlation_group=1e12,
    refire_cooldown_s=0.0,
)
"""The risk gate runs (it must hear of the fill) but never refuses within a run."""


@dataclasses.dataclass
class Probe:
    """The stamps of the fill in flight (``perf_counter_ns``), set once each."""

    client_order_id: str = ""
    stamps: dict[str, int] = dataclasses.field(default_factory=dict)
    done: trio.Event = dataclasses.field(default_factory=trio.Event)

    def stamp(self, span: str, ns: int) -> None:
        """Keep the first ``span`` stamp of this fill; the event once all three are in."""
        self.stamps.setdefault(span, ns)
        if len(self.stamps) == 3:
            self.done.set()


class GateProbe:
    """The risk gate, its fills stamped as they are told."""

    def __init__(self, gate: FillRecorder, probe: Probe) -> None:
        self._gate, self._probe = gate, probe

    def record_fill(
        self, ticker: str, fill_count: float, now_ms: int, correlation_group: str
    ) -> None:
        self._gate.record_fill(ticker, fill_count, now_ms, correlation_group)
        self._probe.stamp("gate", time.perf_counter_ns())


class SinkProbe:
    """The reconciler's row sink, the fill's row stamped once handed over."""

    def __init__(self, sink: OrderRowSink, probe: Probe) -> None:
        self._sink, self._probe = sink, probe

    async def record_order(self, row: OrderRow, *, timeout_s: float = 2.0) -> None:
        await self._sink.record_order(row, timeout_s=timeout_s)
        ours = row.client_order_id == self._probe.client_order_id
        if ours and row.status is OrderStatus.FILLED:
            self._probe.stamp("queued", time.perf_counter_ns())


def commits_probed(
    probe: Probe, token: trio.lowlevel.TrioToken
) -> contextlib.AbstractContextManager[object]:
    """The writer thread's batches, the one committing the fill's row stamped (the consumer's
    ``write_batch`` replaced while the context lasts)."""

    def probed(
        connection: sqlite3.Connection,
        rows: list[TelemetryRow],
        between: Callable[[], None] | None = None,
    ) -> BatchOutcome:
        outcome = write_batch(connection, rows, between)
        now = time.perf_counter_ns()
        for row in outcome.order_rows_committed:
            if row.client_order_id == probe.client_order_id and row.status is OrderStatus.FILLED:
                token.run_sync_soon(probe.stamp, "committed", now)
        return outcome

    return mock.patch.object(consumer_module, "write_batch", probed)


async def _until(condition: Callable[[], bool]) -> None:
    with trio.fail_after(SAMPLE_TIMEOUT_S):
        while not condition():  # noqa: ASYNC110 - nothing to wait on; setup, never timed
            await trio.sleep(0.002)


async def measure(samples: int, directory: Path) -> list[dict[str, float]]:
    """One executor and fake; ``samples`` fills, each one's spans (ms)."""
    credentials = await trio.to_thread.run_sync(FakeCredentials.generate, directory)
    db_path = directory / "lag.db"
    probe = Probe()
    results: list[dict[str, float]] = []
    async with trio.open_nursery() as nursery:
        exchange: FakeExchange = await nursery.start(
            functools.partial(serve_fake_exchange, credentials, balance_cents=10**12)
        )
        telemetry = await nursery.start(serve_telemetry, db_path)
        settings = Settings(
            exchange=ExchangeSettings(
                mode="real",
                base_url=exchange.base_url,
                key_id=credentials.key_id,
                private_key_path=credentials.private_key_path,
                ca_file=credentials.ca_file,
                time_in_force="good_till_canceled",
                book=BookSettings(order_group_contracts_limit=MAX_ORDER_GROUP_CONTRACTS_LIMIT),
            ),
            sizing=SizingConfig(kelly_fraction=0.0),
            risk_enabled=True,
            risk_limits=NO_LIMIT,
            allowed_exchange_indexes=frozenset({0}),
        )
        with commits_probed(probe, trio.lowlevel.current_trio_token()):
            async with open_order_path(
                settings, telemetry, telemetry_db=db_path, kill_switch=None
            ) as fire_path:
                orders = fire_path.orders
                assert orders is not None and orders.counters is not None
                reconciler = orders.dispatcher.reconciler
                assert reconciler is not None
                keeper = reconciler.keeper
                assert keeper.fills is not None
                keeper.fills = GateProbe(keeper.fills, probe)
                keeper.sink = SinkProbe(keeper.sink, probe)
                counters = orders.counters
                await _until(lambda: counters()["stream_connected"] == 1)  # trusted
                for number in range(samples):
                    before = set(exchange.book)
                    await fire_path.fire(in_process_wake(f"lag-{number}"))
                    (client_order_id,) = set(exchange.book) - before
                    await _until(
                        functools.partial(reconciler.followed.__contains__, client_order_id)
                    )
                    await trio.sleep(QUIET_S)
                    probe.client_order_id, probe.stamps = client_order_id, {}
                    probe.done = trio.Event()
                    t0 = time.perf_counter_ns()
                    exchange.fill_resting(client_order_id)
                    with trio.fail_after(SAMPLE_TIMEOUT_S):
                        await probe.done.wait()
                    results.append({k: (v - t0) / 1e6 for k, v in probe.stamps.items()})
        telemetry.close()
        nursery.cancel_scope.cancel()
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        rows = db.execute(
            "SELECT correlation_id, duration_ms, metadata_json FROM latency_events"
            " WHERE stage = 'stream_row'"
        ).fetchall()
    lags = {c: d for c, d, meta in rows if orjson.loads(meta).get("channel") == "fill"}
    for number, sample in enumerate(results):
        sample["stream_row"] = float(lags.get(f"lag-{number}", float("nan")))
    return results


def summary_lines(runs: Sequence[tuple[list[dict[str, float]], str]]) -> list[str]:
    """Per span: each run's p50/p99/max (ms), the median of the p50s, and against the bound."""
    lines = [f"ms from the fake's fill (t0) to each moment; {len(runs)} runs"]
    for span in SPANS:
        cells = []
        worst = 0.0
        for samples, _ in runs:
            values = [s[span] for s in samples if s[span] == s[span]]  # NaN: no row
            if not values:
                cells.append("no rows")
                continue
            worst = max(worst, max(values))
            cells.append(
                f"p50 {percentile(values, 0.5):.2f} p99 {percentile(values, 0.99):.2f}"
                f" max {max(values):.2f} (n={len(values)})"
            )
        within = "within" if worst <= BOUND_MS else "NOT within"
        lines.append(f"  {span:>10}: " + " | ".join(cells) + f"  -> {within} {BOUND_MS:g} ms")
    p50s = [percentile([s["committed"] for s in samples], 0.5) for samples, _ in runs]
    lines.append(f"  committed p50 median over runs {statistics.median(p50s):.2f} ms")
    lines += [f"  run {number + 1}: {load}" for number, (_, load) in enumerate(runs)]
    return lines


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``--runs`` executors of ``--samples`` fills each; print the spans (and keep them)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.stream_lag", description=__doc__
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=200, help="fills per run")
    parser.add_argument("--out", type=Path, default=None, help="folder for the raw samples")
    args = parser.parse_args(argv)
    runs: list[tuple[list[dict[str, float]], str]] = []
    # The account poll disabled after its first, as the test asks.
    no_poll = mock.patch.object(account_module, "ACCOUNT_POLL_INTERVAL_S", 3600.0)
    with no_poll, tempfile.TemporaryDirectory(prefix="bench-lag-") as top:
        start_logging("json", "info", writer=logging.FileHandler(Path(top) / "executor.log"))
        try:
            for number in range(args.runs):
                before = _load()
                directory = Path(top) / f"run-{number + 1}"
                samples = trio.run(measure, args.samples, directory)
                runs.append((samples, f"load average before {before}, after {_load()}"))
                print(f"run {number + 1}: {len(samples)} fills; {runs[-1][1]}", flush=True)
        finally:
            stop_logging()
    lines = summary_lines(runs)
    print("\n".join(lines))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / "lag.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["run", "sample", *(f"{span}_ms" for span in SPANS)])
            for number, (samples, _) in enumerate(runs):
                for index, sample in enumerate(samples):
                    writer.writerow([number + 1, index, *(f"{sample[s]:.3f}" for s in SPANS)])
        command = f"python -m bench.experiments.stream_lag {' '.join(argv or sys.argv[1:])}"
        (args.out / "lag-summary.txt").write_text(
            "\n".join([command.rstrip(), *lines]) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
