"""The stream's benchmark scripts run on a tiny setting and keep every sample they report (no
timed assertions: the figures are in docs/performance/notebook)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.experiments.stream_client import VARIANTS
from bench.experiments.stream_client import main as stream_client_main

REPO = Path(__file__).resolve().parents[2]


def rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file, by header."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_stream_client_ab_reads_with_both_clients_and_keeps_every_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two tiny rounds connect, read a burst and paced messages with trio-websocket and with
    wsproto over the stdlib TLS socket, print both in the summary and write one raw sample per
    connection and message, and one CPU figure per round, variant and mode."""
    argv = ["--rounds", "2", "--connects", "2", "--warmup", "2", "--burst", "5"]
    argv += ["--paced", "3", "--gap-us", "100", "--out", str(tmp_path)]
    assert stream_client_main(argv) == 0
    out = capsys.readouterr().out
    for variant in VARIANTS:
        assert out.count(f" {variant}: connect p50") == 2  # one line per round
        assert re.search(rf"paced +{variant}: p50", out)
        assert re.search(rf"cpu burst +{variant}: ", out)
    samples = rows(tmp_path / "samples.csv")
    for variant in VARIANTS:
        mine = [row for row in samples if row["variant"] == variant]
        counts = {
            m: sum(row["measure"] == m for row in mine) for m in ("connect", "burst", "paced")
        }
        assert counts == {"connect": 2 * 2, "burst": 2 * 5, "paced": 2 * 3}
    assert all(float(row["us"]) > 0 for row in samples)
    cpu = rows(tmp_path / "cpu.csv")
    assert sorted((row["variant"], row["mode"]) for row in cpu) == sorted(
        (variant, mode) for variant in VARIANTS for mode in ("burst", "paced") for _ in range(2)
    )
    assert (tmp_path / "summary.txt").read_text(encoding="utf-8").count("load average") == 2


def test_the_stream_lag_run_stamps_every_fill_in_order(tmp_path: Path) -> None:
    """A tiny run (its own process: it starts the product's logging) fills two resting orders
    and keeps, per fill, the gate, queued and committed stamps and the product's stream_row
    lag; the risk gate is told at the ledger's merge, before the row is queued (a write cut
    short cannot lose it), and both before the commit."""
    command = [sys.executable, "-m", "bench.experiments.stream_lag", "--runs", "1"]
    command += ["--samples", "2", "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "committed: p50" in done.stdout and "within 100 ms" in done.stdout
    lags = rows(tmp_path / "lag.csv")
    assert [(row["run"], row["sample"]) for row in lags] == [("1", "0"), ("1", "1")]
    for row in lags:
        queued, gate, committed = (float(row[f"{s}_ms"]) for s in ("queued", "gate", "committed"))
        assert 0 < gate <= queued <= committed
        assert float(row["stream_row_ms"]) >= 0  # not NaN: the product wrote its row
