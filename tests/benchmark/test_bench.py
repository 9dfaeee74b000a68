"""The benchmark harness computes and records correctly on tiny runs (no timed assertions)."""

from __future__ import annotations

import csv
import shutil
import socket
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import bench.clients.latency
import bench.harness.runner
from bench.harness.cli import build_parser, main
from bench.harness.processes import BenchError, executor_spec
from bench.reports.output import HISTORY_HEADER, ratio_lines
from bench.reports.stats import percentile
from bench.scenarios.throughput import run_rate

UNPINNED = ["--placement", "unpinned"]
"""Placement is its own configuration (tested apart); these tests run each executor once."""

REPO = Path(__file__).resolve().parents[2]
TINY = ["--iterations", "20", "--warmup", "5", "--runs", "2"]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _header(path: Path) -> str:
    return path.read_text(encoding="utf-8").splitlines()[0]


@pytest.fixture
def out_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="bench-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _lossy_executor(directory: Path, drop: int) -> str:
    """A ``cmd:`` executor: the baseline, but its first ``drop`` rows are never recorded."""
    script = directory / "lossy_executor.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(REPO)!r})
            import bench.baselines.executor
            from bench.baselines.rowwriter import RowWriter

            original = RowWriter.record
            skipped = []

            def record(self, row):
                if len(skipped) < {drop}:
                    skipped.append(row)
                    return
                original(self, row)

            RowWriter.record = record
            sys.exit(bench.baselines.executor.main(sys.argv[1:]))
            """
        ),
        encoding="utf-8",
    )
    return f"cmd:{sys.executable} {script}"


def test_baseline_run_writes_exact_files_and_recomputable_percentiles(out_dir: Path) -> None:
    """A tiny baseline run writes both CSVs with exact headers and recomputable percentiles."""
    history = out_dir / "history.csv"
    argv = ["--executors", "asyncio", "--clients", "blocking", *TINY, "--no-components"]
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "r"), "--history", str(history)]) == 0
    summary_path, samples_path = out_dir / "r" / "summary.csv", out_dir / "r" / "samples.csv"
    assert _header(summary_path) == "run,executor,client,span,n,warmup,p50_us,p90_us,p99_us"
    assert _header(samples_path) == "run,executor,client,span,index,duration_us"
    summary, samples = _rows(summary_path), _rows(samples_path)
    assert {(r["run"], r["span"]) for r in summary} == {
        (run, span) for run in ("1", "2") for span in ("wake_recv", "roundtrip")
    }
    for row in summary:
        kept = [
            float(s["duration_us"])
            for s in samples
            if (s["run"], s["executor"], s["client"], s["span"])
            == (row["run"], row["executor"], row["client"], row["span"])
        ]
        assert len(kept) == int(row["n"]) == 20
        assert row["warmup"] == "5"
        for column, p in (("p50_us", 0.5), ("p90_us", 0.9), ("p99_us", 0.99)):
            assert float(row[column]) == percentile(kept, p)
    machine = (out_dir / "r" / "machine.txt").read_text(encoding="utf-8")
    for key in ("platform:", "python:", "cpu_model:", "cpu_count:", "loadavg_start:",
                "loadavg_end:", "package trio:"):  # fmt: skip
        assert key in machine


def test_history_is_appended_never_rewritten(out_dir: Path) -> None:
    """A second invocation keeps the first's history rows and the single header, adding its own."""
    history = out_dir / "history.csv"
    argv = ["--executors", "uvloop", "--clients", "asyncio", "--iterations", "10", "--warmup", "2"]
    argv += ["--runs", "1", "--no-components", "--history", str(history)]
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "a")]) == 0
    first = history.read_text(encoding="utf-8")
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "b")]) == 0
    second = history.read_text(encoding="utf-8")
    assert second.startswith(first)
    lines = second.splitlines()
    assert lines[0] == ",".join(HISTORY_HEADER)
    assert len(lines) == 3 and lines.count(lines[0]) == 1
    row = _rows(history)[1]
    assert (row["executor"], row["client"], row["warmup"], row["n"]) == (
        "uvloop",
        "asyncio",
        "2",
        "10",
    )
    assert row["wake_recv_p50_us"] and row["wake_send_p99_us"] and not row["roundtrip_p50_us"]
    assert socket.gethostname() not in row["platform"]


def test_no_history_leaves_the_history_file_alone(out_dir: Path) -> None:
    """--no-history writes the run's files but never creates or touches the history."""
    history = out_dir / "history.csv"
    argv = ["--executors", "asyncio", "--clients", "blocking", "--iterations", "5", "--warmup", "1"]
    argv += ["--runs", "1", "--no-components", "--no-history", "--history", str(history)]
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "r")]) == 0
    assert (out_dir / "r" / "summary.csv").exists()
    assert not history.exists()


def test_trio_executor_and_trio_client_run_and_report_ratios(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trio executor (``executor serve``) completes a run and the ratio line is printed."""
    argv = ["--executors", "trio,asyncio", "--clients", "blocking,trio", "--iterations", "10"]
    argv += ["--warmup", "2", "--runs", "1", "--no-components", "--no-history"]
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "r")]) == 0
    spans = {(r["executor"], r["client"], r["span"]) for r in _rows(out_dir / "r" / "summary.csv")}
    assert ("trio", "trio", "wake_send") in spans and ("trio", "blocking", "wake_recv") in spans
    assert "asyncio / trio  roundtrip" in capsys.readouterr().out


def test_lost_row_is_an_error_not_a_result(out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor that acks every frame but records one row fewer makes the run fail."""
    monkeypatch.setattr(bench.harness.runner, "COMPLETION_TIMEOUT_S", 1.5)
    spec = executor_spec(_lossy_executor(out_dir, drop=1))
    with pytest.raises(BenchError, match="rows"):
        bench.harness.runner.run_configuration(spec, "blocking", 1, 2, 8)
    argv = ["--executors", spec.name, "--clients", "blocking", "--iterations", "8", "--warmup", "2"]
    argv += ["--runs", "1", "--no-components", "--history", str(out_dir / "h.csv")]
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "r")]) == 1
    assert not (out_dir / "h.csv").exists()


def test_lossless_cmd_executor_completes(out_dir: Path) -> None:
    """The same cmd: wrapper dropping nothing completes: the failure above is the lost row."""
    spec = executor_spec(_lossy_executor(out_dir, drop=0))
    series = bench.harness.runner.run_configuration(spec, "blocking", 1, 2, 8)
    assert [(s.span, len(s.samples_us)) for s in series] == [("wake_recv", 8), ("roundtrip", 8)]


def test_frame_spans_of_an_executor_that_writes_them_are_read(out_dir: Path) -> None:
    """``executor serve --frame-spans`` writes a ``wake_frame`` row per frame: the run reads
    them as their own series, each no longer than its frame's ``wake_recv``."""
    spec = executor_spec(f"cmd:{sys.executable} -m executor serve --frame-spans")
    series = bench.harness.runner.run_configuration(spec, "blocking", 1, 2, 8)
    spans = {s.span: s.samples_us for s in series}
    assert [(s.span, len(s.samples_us)) for s in series] == [
        ("wake_recv", 8),
        ("wake_frame", 8),
        ("roundtrip", 8),
    ]
    pairs = zip(spans["wake_frame"], spans["wake_recv"], strict=True)
    assert all(0 < own <= whole for own, whole in pairs)


def test_a_lost_frame_span_row_is_an_error(out_dir: Path) -> None:
    """An executor writing one ``wake_frame`` row fewer than its frames makes the run fail: a
    frame's own span is kept only when every frame has one."""
    script = out_dir / "lossy_spans.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(REPO)!r})
            import executor.wire.connection as connection
            from executor.main import main

            original = connection._record_frame_spans
            dropped = []

            def record_frame_spans(acked, encoded, ended_at_ms, record):
                def keep(row):
                    if dropped:
                        record(row)
                    else:
                        dropped.append(row)

                original(acked, encoded, ended_at_ms, keep)

            connection._record_frame_spans = record_frame_spans
            sys.exit(main())
            """
        ),
        encoding="utf-8",
    )
    spec = executor_spec(f"cmd:{sys.executable} {script} serve --frame-spans")
    with pytest.raises(BenchError, match="9 wake_frame rows for 10 frames"):
        bench.harness.runner.run_configuration(spec, "blocking", 1, 2, 8)


def test_help_mentions_every_flag() -> None:
    """--help documents every option the harness accepts."""
    text = build_parser().format_help()
    for flag in ("--executors", "--clients", "--iterations", "--warmup", "--runs",
                 "--components", "--no-components", "--out", "--history", "--no-history",
                 "--throughput", "--connections", "--seconds", "--rates", "cmd:COMMAND",
                 "wake_recv", "roundtrip", "wake_send"):  # fmt: skip
        assert flag in text


def test_unknown_executor_is_refused() -> None:
    """A misspelt executor name is a usage error, not a silent skip."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--executors", "tri0", "--no-history"])
    assert exit_info.value.code == 2


def test_ratio_lines_divide_by_trio_same_client() -> None:
    """Ratios are each executor's median p50 over trio's for the same client and span."""
    medians = {
        ("trio", "blocking", "wake_recv"): 50.0,
        ("uvloop", "blocking", "wake_recv"): 60.0,
        ("uvloop", "blocking", "roundtrip"): 10.0,
    }
    lines = ratio_lines(medians)
    assert any("uvloop / trio  wake_recv" in line and "1.200x" in line for line in lines)
    assert not any("roundtrip" in line for line in lines)


def test_throughput_counts_every_acked_frame(out_dir: Path) -> None:
    """A short flood against the baseline acks every frame sent and accounts for every row."""
    result = run_rate(executor_spec("asyncio"), connections=1, seconds=0.3, rate=500.0)
    assert result.sent > 0 and result.acked == result.sent
    assert result.rows_written + result.drops == result.acked
    assert "drops=" in result.line()


def test_burst_scenario_completes_exactly_and_writes_its_files(
    out_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--burst drives both burst clients to exact completion and writes burst.csv and throughput."""
    argv = ["--burst", "--executors", "trio,uvloop", "--iterations", "20", "--warmup", "5"]
    argv += ["--runs", "1", "--seconds", "0.3", "--no-components", "--no-history"]
    assert main([*argv, *UNPINNED, "--out", str(out_dir / "r")]) == 0
    summary = _rows(out_dir / "r" / "summary.csv")
    assert {(r["executor"], r["client"], r["span"]) for r in summary} == {
        (executor, client, span)
        for executor in ("trio", "uvloop")
        for client in ("burst-asyncio", "burst-uvloop")
        for span in ("wake_recv", "wake_send")
    }
    assert {(r["n"], r["warmup"]) for r in summary} == {("20", "5")}
    samples = _rows(out_dir / "r" / "samples.csv")
    burst_path = out_dir / "r" / "burst.csv"
    assert _header(burst_path) == (
        "run,executor,client,n,warmup,p50_us,p90_us,p99_us,max_us,deepest_queue,frames_per_s,lost"
    )
    burst = _rows(burst_path)
    assert len(burst) == 4
    for row in burst:
        kept = [
            float(s["duration_us"])
            for s in samples
            if (s["executor"], s["client"], s["span"])
            == (row["executor"], row["client"], "wake_send")
        ]
        assert len(kept) == int(row["n"]) == 20
        assert float(row["p99_us"]) == percentile(kept, 0.99)
        assert float(row["max_us"]) == max(kept)
        assert 1 <= int(row["deepest_queue"]) <= bench.clients.latency.POLLER_QUEUE
        assert float(row["frames_per_s"]) > 0
        assert row["lost"] == "0"  # a burst-* client blocks in put: it cannot lose a wake
    throughput = _rows(out_dir / "r" / "throughput.csv")
    assert [r["executor"] for r in throughput] == ["trio", "uvloop"]
    for row in throughput:
        assert row["connections"] == "1"
        assert int(row["acked"]) == int(row["sent"]) > 0
        assert int(row["rows_written"]) + int(row["drops"]) == int(row["acked"])
    printed = capsys.readouterr().out
    assert "burst wake_send" in printed and "one connection, flat out" in printed


def test_unknown_burst_client_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt burst client is a usage error naming the burst clients that exist."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--burst", "--clients", "burst-trio", "--no-history"])
    assert exit_info.value.code == 2
    assert "burst-asyncio" in capsys.readouterr().err


def _misacking_executor(directory: Path) -> str:
    """A ``cmd:`` executor: the baseline, but its third ack echoes the wrong correlation id."""
    script = directory / "misacking_executor.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(REPO)!r})
            import bench.baselines.executor

            original = bench.baselines.executor.encode_accepted_ack
            seen = []

            def encode(correlation_id, received_at_ms):
                seen.append(correlation_id)
                if len(seen) == 3:
                    correlation_id = "not-" + correlation_id
                return original(correlation_id, received_at_ms)

            bench.baselines.executor.encode_accepted_ack = encode
            sys.exit(bench.baselines.executor.main(sys.argv[1:]))
            """
        ),
        encoding="utf-8",
    )
    return f"cmd:{sys.executable} {script}"


def test_burst_with_a_wrong_ack_is_an_error(out_dir: Path) -> None:
    """A burst whose executor echoes one wrong correlation id fails instead of timing the rest."""
    spec = executor_spec(_misacking_executor(out_dir))
    with pytest.raises(BenchError, match="unexpected ack"):
        bench.harness.runner.run_configuration(spec, "burst-uvloop", 1, 2, 8)
