"""``executor stats`` shows the fires the exchange's halts refused (its group trigger, a pause)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from executor.exchange.halts import ExchangeHalts
from executor.stats.command import stats_main
from tests.stats.test_stats import connect, make_db, now_ms, run_stats


def insert_rejected(path: Path, reasons: list[str], at_ms: int) -> None:
    """One ``rejected`` row per reason, requested at ``at_ms``."""
    with connect(path) as db:
        for index, reason in enumerate(reasons):
            db.execute(
                "INSERT INTO orders_fired (correlation_id, client_order_id, ticker, outcome_side,"
                " count, price_dollars, time_in_force, self_trade_prevention_type, status,"
                " error_message, requested_at_ms) VALUES ('c', ?, 'T', 'yes', '1.00', '0.5000',"
                " 'fill_or_kill', 'taker_at_cross', 'rejected', ?, ?)",
                (f"h{index}", reason, at_ms),
            )


def halt_reasons() -> list[str]:
    """The rows' texts as the halts write them: two group refusals, one of each pause, and a
    risk refusal that is no halt."""
    group, trading, exchange = ExchangeHalts("og-1"), ExchangeHalts(None), ExchangeHalts(None)
    with capture_logs():  # their WARNING lines, kept off the report's stdout
        group.hear_group_event("triggered", "og-1")
        trading.hear_status(exchange_active=True, trading_active=False, resume_time="2026-12-10")
        exchange.hear_status(exchange_active=False, trading_active=False, resume_time=None)
    texts = [group.group_halt(), group.group_halt()]
    texts += [trading.trading_pause(), exchange.trading_pause()]
    return [text for text in texts if text is not None] + ["risk gate: max_position 5"]


def test_stats_counts_the_rows_each_halt_refused_and_when_the_last_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two group refusals and two pause refusals are counted apart (a risk refusal is neither),
    with the last one's time; the text report says it on one line."""
    path = tmp_path / "t.db"
    make_db(path)
    at_ms = now_ms()
    insert_rejected(path, halt_reasons(), at_ms)
    document = run_stats(capsys, "--telemetry-db", path)
    assert document["orders_fired"]["exchange_halts"] == {
        "refused_order_group": 2,
        "refused_paused": 2,
        "last_refused_at_ms": at_ms,
    }
    assert stats_main(["--telemetry-db", os.fspath(path)]) == 0
    text = capsys.readouterr().out
    assert "  exchange halts: refused_order_group=2 refused_paused=2 (last " in text
