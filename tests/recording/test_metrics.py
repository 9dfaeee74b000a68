"""``executor serve --metrics``: the Prometheus endpoint agrees with the exit lines."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from executor.recording.counting.metrics import parse_metrics_address
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake
from tests.support.processes import (
    Spawner,
    assert_one_line_failure,
    exit_counters,
    metrics_port,
    open_client,
    receive_ack,
    wait_until_accepting,
)

SCRAPE_TIMEOUT_S = 5.0
"""Longest one scrape may take (a loaded 2-core box)."""

SETTLE_TIMEOUT_S = 15.0
"""Longest the telemetry writer may take to commit a few frames' rows (it lingers 10 ms)."""


@pytest.fixture
def spawner(short_dir: Path) -> Iterator[Spawner]:
    """A process starter whose leftovers are killed when the test ends, pass or fail."""
    spawner = Spawner(short_dir)
    try:
        yield spawner
    finally:
        spawner.kill_all()


def scrape(port: int) -> dict[str, float]:
    """Every sample of ``/metrics`` by name (labels folded into the name as name{k=v})."""
    with urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT_S
    ) as reply:
        text = reply.read().decode()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9464", ("127.0.0.1", 9464)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:9464", ("localhost", 9464)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
        ("[::1]:9464", ("::1", 9464)),
    ],
)
def test_metrics_address_accepts(text: str, expected: tuple[str, int]) -> None:
    """HOST:PORT, [IPv6]:PORT and a bare PORT (on 127.0.0.1) parse."""
    assert parse_metrics_address(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "host:", ":9464", "1.2.3.4:65536", "::1:80", "[x]:1"])
def test_metrics_address_refuses(text: str) -> None:
    """Anything else is a ValueError (which the CLI turns into one line)."""
    with pytest.raises(ValueError):
        parse_metrics_address(text)


def test_scrape_matches_the_exit_lines(spawner: Spawner, short_dir: Path) -> None:
    """After N frames a scrape reports every exit-line counter with the value the exit prints."""
    socket_path, db_path = short_dir / "x.sock", short_dir / "t.db"
    executor = spawner.serve(
        socket_path, db_path, "--metrics", "127.0.0.1:0", "--log-format", "json"
    )
    port = metrics_port(executor)
    accepted = 9
    with open_client(socket_path) as sock:
        frames = [make_wake(f"m-{i}", dry_run=i % 3 == 0) for i in range(accepted)]
        sock.sendall(b"".join(encode_frame(wake) for wake in frames) + encode_frame({"x": 1}))
        statuses = [receive_ack(sock).status for _ in range(accepted + 1)]
    assert statuses == ["accepted"] * accepted + ["rejected"]

    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        scraped = scrape(port)
        if scraped["trio_executor_telemetry_rows_written_total"] == accepted:
            break
        assert time.monotonic() < deadline, scraped
        time.sleep(0.05)
    assert scraped["trio_executor_latency_seconds_count{stage=wake_recv}"] == accepted
    assert scraped["trio_executor_telemetry_channel_depth"] == 0
    assert scraped["trio_executor_connections_open"] == 0

    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    server, telemetry = exit_counters(executor.stderr_lines())
    assert server["frames"] == accepted + 1
    for key, value in server.items():
        gauges = {"stream_connected", "order_group_triggered", "orders_open", "trading_paused"}
        suffix = "" if key in gauges else "_total"  # 1 while connected / triggered; followed now
        assert scraped[f"trio_executor_{key}{suffix}"] == value, key
    for key, value in telemetry.items():
        suffix = "" if key == "audit_unavailable" else "_total"  # a gauge: 1 while unavailable
        assert scraped[f"trio_executor_telemetry_{key}{suffix}"] == value, key


def test_busy_metrics_port_is_one_line_and_touches_nothing(
    spawner: Spawner, short_dir: Path
) -> None:
    """A metrics port already taken fails start-up in one line; no database, no socket."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = spawner.run(
            "serve",
            "--socket",
            short_dir / "x.sock",
            "--telemetry-db",
            short_dir / "t.db",
            "--metrics",
            f"127.0.0.1:{port}",
        )
    assert_one_line_failure(refused, f"127.0.0.1:{port}")
    assert not (short_dir / "t.db").exists()
    assert not (short_dir / "x.sock").exists()


def test_bad_metrics_address_is_one_line(spawner: Spawner, short_dir: Path) -> None:
    """A malformed --metrics value is one line naming the flag, exit 2."""
    refused = spawner.run("serve", "--socket", short_dir / "x.sock", "--metrics", "here:port")
    assert refused.returncode == 2
    assert_one_line_failure(refused, "--metrics", "HOST:PORT")


def test_metrics_are_off_by_default(spawner: Spawner, short_dir: Path) -> None:
    """Without --metrics no endpoint is started (no metrics log line)."""
    socket_path = short_dir / "x.sock"
    executor = spawner.start("serve", "--socket", socket_path, "--telemetry-db", short_dir / "t.db")
    wait_until_accepting(executor, socket_path)
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    assert "metrics endpoint" not in executor.stderr()
