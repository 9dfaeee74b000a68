"""The one INFO line per resolved real order: what was sent, what the exchange said, detect_fire."""

from __future__ import annotations

import time
from typing import Any

from structlog.testing import capture_logs

from executor.clock import clock_domain
from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.orders.transport import ExchangeError
from executor.recording.rows import OrderRow, OrderRowKind
from executor.wire.protocol import WakeMessage
from tests.support.inprocess import make_wake
from tests.support.order_fakes import FakePlacer, order_harness


def wake(correlation_id: str = "c-1", **overrides: Any) -> WakeMessage:
    """A real wake on exchange shard 0 at 0.56."""
    fields: dict[str, Any] = {"exchange_index": 0, "correlation_group": "grp", **overrides}
    return make_wake(correlation_id, **fields)


def resolved_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The captured "order resolved" entries."""
    return [entry for entry in logs if entry["event"] == "order resolved"]


def resolution(rows: list[Any]) -> OrderRow:
    """The one resolution row among the sink's order rows."""
    (row,) = [r for r in rows if isinstance(r, OrderRow) and r.kind is OrderRowKind.RESOLUTION]
    return row


async def test_a_filled_order_is_one_info_line_matching_its_row() -> None:
    """A filled order logs one INFO line with its orders_fired row's fields and detect_fire."""
    placer = FakePlacer([], response={"order_id": "k-7", "fill_count": "1.00"})
    message = wake(recv_ns=time.perf_counter_ns() - 2_000_000, clock_domain=clock_domain())
    async with order_harness(placer=placer) as harness:
        with capture_logs() as logs:
            await harness.fire_path.fire(message)
    (line,) = resolved_lines(logs)
    row = resolution(harness.sink.orders)
    (detect_fire,) = [r for r in harness.sink.latency if r.stage.value == "detect_fire"]
    assert line["log_level"] == "info"
    assert (line["ticker"], line["side"], line["count"], line["price"]) == (
        row.ticker,
        "yes",
        "1.00",
        "0.5600",
    )
    assert (line["status"], line["fill_count"], line["kalshi_order_id"]) == (
        "filled",
        "1.00",
        "k-7",
    )
    assert line["detect_fire_ms"] == round(detect_fire.duration_ms, 3)
    assert line["detect_fire_ms"] >= 2.0
    assert (line["client_order_id"], line["correlation_id"]) == (row.client_order_id, "c-1")
    assert line["error"] is None


async def test_a_failed_order_logs_its_error_status() -> None:
    """An order the exchange failed is resolved as error, and its line says so with the text."""
    placer = FakePlacer([], error=ExchangeError("exchange answered 503"))
    async with order_harness(placer=placer) as harness:
        with capture_logs() as logs:
            await harness.fire_path.fire(wake("c-2"))
    (line,) = resolved_lines(logs)
    assert (line["status"], line["kalshi_order_id"]) == ("error", None)
    assert "503" in line["error"]
    assert line["detect_fire_ms"] is None  # make_wake carries no recv_ns on this clock
    assert any(entry["event"] == "dispatch failed" for entry in logs)


async def test_shadow_fires_and_refusals_log_no_order_line() -> None:
    """A shadow fire places no order and a refused fire resolves none: no "order resolved"."""
    gate = RiskGate(RiskLimits(max_attempts_per_hour=0), frozenset({0}))
    async with order_harness(risk=gate) as harness:
        with capture_logs() as logs:
            harness.fire_path.fire_now(wake("shadow", dry_run=True))
            await harness.fire_path.fire(wake("refused"))
    assert resolved_lines(logs) == []
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == [
        "fire_refused_risk"
    ]
