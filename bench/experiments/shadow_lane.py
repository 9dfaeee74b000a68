"""Does a burst of shadow fires delay a real one? ``python -m bench.experiments.shadow_lane``.

DISPATCH.md §1 asks that a real fire never wait behind shadow fires, and that the arrangement be
shown with a measurement. This runs the executor's real order path (``executor.trading.assembly``)
against
the in-process fake exchange over TLS and times each real fire's ``detect_fire`` span (from its
wake's ``recv_ns`` to the request handed to the HTTP client) in three conditions, interleaved
round by round so drift hits all alike:

- ``alone``: nothing else to do;
- ``lane``: N shadow wakes handled between the real wake's arrival and its fire, through the
  fire path (built and queued in the shadow lane, signed there);
- ``in line``: the same N shadow orders built and signed in line before the real fire (what a
  design without the lane does when the shadow tasks run first).

The figures are medians and p90s in ms on the machine it runs on.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sqlite3
import tempfile
from pathlib import Path

import trio

from bench.clients.frames import in_process_wake
from bench.reports.stats import percentile
from executor.config.settings import ExchangeSettings, Settings
from executor.config.sizing import SizingConfig
from executor.decide.order_request import FireRequest, OrderTemplate
from executor.decide.risk import RiskLimits
from executor.exchange.orders.shadow_lane import SHADOW_LANE_CAPACITY
from executor.exchange.orders.stages import FireStamps
from executor.fake.exchange import FakeCredentials, serve_fake_exchange
from executor.telemetry import serve_telemetry
from executor.trading.assembly import open_order_path

CONDITIONS = ("alone", "lane", "inline")
"""Nothing queued; a burst of shadow fires through the lane; the same burst signed in line."""

SETTLE_S = 0.15
"""Pause after each real fire (seconds): the lane drains, the response is read, and the order rate
stays under the transport's limit (10 tokens per order, 100/s: at most 10 orders/s)."""


async def measure(rounds: int, burst: int, directory: Path) -> dict[str, list[float]]:
    """Run ``rounds`` real fires per condition; return their ``detect_fire`` durations (ms)."""
    credentials = await trio.to_thread.run_sync(FakeCredentials.generate, directory)
    db_path = directory / "bench.db"
    async with trio.open_nursery() as nursery:
        exchange = await nursery.start(
            functools.partial(serve_fake_exchange, credentials, balance_cents=10**9)
        )
        telemetry = await nursery.start(serve_telemetry, db_path)
        settings = Settings(
            exchange=ExchangeSettings(
                mode="real",
                base_url=exchange.base_url,
                key_id=credentials.key_id,
                private_key_path=credentials.private_key_path,
                ca_file=credentials.ca_file,
            ),
            sizing=SizingConfig(kelly_fraction=0.0),
            risk_enabled=False,  # measuring the path, not the gate's cooldowns
            risk_limits=RiskLimits(),
            allowed_exchange_indexes=frozenset({0}),
        )
        async with open_order_path(
            settings, telemetry, telemetry_db=db_path, kill_switch=None
        ) as fire_path:
            orders = fire_path.orders
            assert orders is not None
            for index in range(rounds):
                for condition in CONDITIONS:
                    # The real wake arrives first; the burst is handled between its arrival and
                    # its fire, as when the shadow wakes are read just before it.
                    real = in_process_wake(f"{condition}-{index}", dry_run=False)
                    for shadow in range(burst if condition != "alone" else 0):
                        message = in_process_wake(f"s-{condition}-{index}-{shadow}", dry_run=True)
                        if condition == "lane":
                            await fire_path.fire(message)
                        else:  # the design the lane replaces: sign in line, ahead of the real fire
                            stamps = FireStamps()
                            request = FireRequest(
                                OrderTemplate(message.market_ticker, "yes", "bid"),
                                "0.5000",
                                1,
                                0,
                                message.correlation_id,
                                "",
                                True,
                            )
                            body = orders.dispatcher.build_shadow(request, stamps)
                            await orders.dispatcher.client.place_order(
                                body, stamps.order, dry_run=True
                            )
                    await fire_path.fire(real)
                    await trio.sleep(SETTLE_S)
        telemetry.close()
        nursery.cancel_scope.cancel()
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        rows = db.execute(
            "SELECT correlation_id, duration_ms FROM latency_events WHERE stage = 'detect_fire'"
            " AND metadata_json = '{\"dry_run\": false}'"
        ).fetchall()
        signs = [
            duration_ms
            for (duration_ms,) in db.execute(
                "SELECT duration_ms FROM latency_events WHERE stage = 'sign'"
            )
        ]
    db.close()
    spans: dict[str, list[float]] = {condition: [] for condition in CONDITIONS}
    spans["sign"] = signs
    for correlation_id, duration_ms in rows:
        spans[correlation_id.split("-")[0]].append(duration_ms)
    return spans


def main(argv: list[str] | None = None) -> int:
    """Print the real fire's ``detect_fire`` median and p90 alone and behind a shadow burst."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.shadow_lane", description=__doc__
    )
    parser.add_argument("--rounds", type=int, default=100, help="real fires per condition")
    parser.add_argument("--burst", type=int, default=SHADOW_LANE_CAPACITY, help="shadows each")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-lane-") as directory:
        spans = trio.run(measure, args.rounds, args.burst, Path(directory))
    print(f"real fire detect_fire (ms), {args.rounds} rounds, burst of {args.burst} shadows")
    labels = {
        "alone": "alone",
        "lane": f"{args.burst} shadows, lane",
        "inline": f"{args.burst} shadows, in line",
    }
    for condition, label in labels.items():
        values = sorted(spans[condition])
        print(
            f"  {label:>20}: n={len(values)} median={percentile(values, 0.5):.3f}"
            f" p90={percentile(values, 0.9):.3f}"
        )
    print(f"  (one signature here: median {percentile(sorted(spans['sign']), 0.5):.3f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
