"""Real wakes at an executor trading against its in-process fake, for the matching engine's clock
spans ``wire_engine`` and ``engine_ack`` (2026-12-02, RESULTS.md).

An experiment, not product: ``PYTHONPATH=. .venv/bin/python
bench/results/2026-12-02-order-path/engine_clock.py DIR`` starts ``executor serve --exchange fake``
on ``DIR/t.db`` (risk limits wide open, one contract an order), sends 120 real wakes 0.1 s apart
on seven markets, stops it with SIGTERM, and prints ``executor stats`` for the two spans and the
offset each order's row carries. On the fake both clocks are this host's.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

from executor.clock import clock_domain
from executor.wire.client import connect
from tests.support.inprocess import make_wake

WAKES = 120
WIDE_OPEN = {
    "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0",
    "KALSHI_KELLY_FRACTION": "0",
    "KALSHI_FIXED_ORDER_CONTRACT_COUNT": "1",
    "KALSHI_RISK_REFIRE_COOLDOWN_SECONDS": "0",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR": "10000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_DAY": "10000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_TICKER_PER_DAY": "10000",
    "KALSHI_RISK_MAX_ATTEMPTS_PER_EVENT_PER_DAY": "10000",
    "KALSHI_RISK_MAX_NOTIONAL_PER_DAY_DOLLARS": "100000",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_TICKER": "100000",
    "KALSHI_RISK_MAX_POSITION_CONTRACTS_PER_EVENT": "100000",
    "KALSHI_ORDER_GROUP_CONTRACTS_LIMIT": "1000000",
}


async def send_wakes(socket: Path) -> None:
    while not os.path.exists(socket):  # noqa: ASYNC110, ASYNC240 - the child makes it
        await trio.sleep(0.1)
    await trio.sleep(1.0)
    async with connect(socket) as client:
        for number in range(WAKES):
            wake = make_wake(
                f"e{number}",
                exchange_index=0,
                market_ticker=f"KXENG-26JAN01-T{number % 7}",
                recv_ns=time.perf_counter_ns(),
                clock_domain=clock_domain(),
            )
            await client.request(wake)
            await trio.sleep(0.1)


def main(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    database, socket = directory / "t.db", directory / "x.sock"
    for leftover in (database, socket):
        leftover.unlink(missing_ok=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith("KALSHI_")}
    command = [sys.executable, "-m", "executor", "serve", "--exchange", "fake"]
    command += ["--socket", str(socket), "--telemetry-db", str(database)]
    with (directory / "stderr.txt").open("wb") as stderr:
        executor = subprocess.Popen(command, env={**env, **WIDE_OPEN}, stderr=stderr)
        trio.run(send_wakes, socket)
        time.sleep(1.0)
        executor.send_signal(signal.SIGTERM)
        executor.wait()
    for stage in ("wire_engine", "engine_ack"):
        stats = [sys.executable, "-m", "executor", "stats", "--telemetry-db", str(database)]
        subprocess.run([*stats, "--stage", stage], check=True)
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT metadata_json FROM latency_events WHERE stage = 'wire_engine'"
        ).fetchall()
    db.close()
    metadata = [json.loads(text) for (text,) in rows]
    offsets = [entry["engine_offset_ms"] for entry in metadata]
    bounds = [entry["engine_offset_within_ms"] for entry in metadata]
    within = sum(abs(offset) <= bound for offset, bound in zip(offsets, bounds, strict=True))
    print(
        f"engine offset ms: p50 {statistics.median(offsets):.3f} min {min(offsets):.3f}"
        f" max {max(offsets):.3f}; bound p50 {statistics.median(bounds):.3f};"
        f" within its bound {within} of {len(offsets)}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
