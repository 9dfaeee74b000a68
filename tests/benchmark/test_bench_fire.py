"""The fire-path benchmark records correctly on tiny runs against the fake exchange (no timing)."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio

from bench.baselines.fire import (
    BaselineConfigError,
    BaselineExchangeConfig,
    config_from_env,
    open_fire_path,
)
from bench.baselines.rowwriter import RowWriter, open_database
from bench.clients.fire import FirePlan, fire_cid, interleaved, phase_of, run_plan
from bench.clients.frames import wake_message
from bench.experiments.order_wire import main as order_wire_main
from bench.experiments.variants import VARIANTS
from bench.experiments.variants import main as variants_main
from bench.harness.cli import main
from bench.harness.fake_process import FakeExchangeInfo, FakeExchangeProcess
from bench.harness.processes import BenchError
from bench.harness.runner import Series
from bench.reports.fire import fire_lines
from bench.reports.output import plot_styles
from bench.scenarios.fire import (
    FIRE_STAGES,
    KINDS,
    PATH_SPANS,
    READ_STAGES,
    RISK_VARIABLES,
    WIRE_ACK,
    StageRow,
    fire_environment,
    series_of,
    wait_for_fire_rows,
)
from executor.clock import clock_domain
from executor.config.book import MAX_ORDER_GROUP_CONTRACTS_LIMIT
from executor.decide.risk import RiskGate, RiskLimits
from executor.exchange.orders.dispatcher import OrderDispatcher
from executor.exchange.orders.transport import (
    ExchangeEndpoint,
    ExchangeError,
    OrderSpec,
    OrderStamps,
    open_exchange,
    order_body,
)
from executor.fake.exchange import FakeCredentials, FakeExchange, serve_fake_exchange
from executor.recording.orders.intent_journal import journal_path, read_journal, row_record_fields
from executor.signer import KalshiSigner
from executor.telemetry import Telemetry
from executor.wire import session
from executor.wire.handoff import FireHandoff
from executor.wire.protocol import (
    WakeMessage,
    decode_wake,
    decode_wake_message,
    encode_accepted_ack,
    encode_frame,
)
from tests.support.inprocess import make_wake
from tests.support.order_fakes import StartingPlacer, order_harness
from tests.support.rows import order_row, running_telemetry

UNPINNED = ["--placement", "unpinned"]
"""Placement is its own configuration (tested apart); these tests run each executor once."""

PINNED_ORDER_ID = "0123456789abcdef0123456789abcdef"
WAIT_S = 60.0


@pytest.fixture
def work_dir() -> Iterator[Path]:
    """A short private directory for sockets, databases and credentials."""
    directory = Path(tempfile.mkdtemp(prefix="fb-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _fire_wake(cid: str, *, dry_run: bool, domain: str | None = None) -> WakeMessage:
    return replace(
        wake_message(cid, 1),
        recv_ns=1,
        clock_domain=clock_domain() if domain is None else domain,
        dry_run=dry_run,
        exchange_index=0,
    )


def test_tiny_fire_run_writes_exactly_the_stage_spans_and_counts(work_dir: Path) -> None:
    """--fire-only on the baseline: five stage spans, four kinds, exact n per kind, no history."""
    history = work_dir / "history.csv"
    out = work_dir / "r"
    argv = ["--fire-only", "--executors", "asyncio", "--runs", "1", "--fire-warmup", "1"]
    argv += ["--fire-shadow", "3", "--fire-real", "2", "--fire-bursts", "1"]
    assert main([*argv, *UNPINNED, "--out", str(out), "--history", str(history)]) == 0
    summary = _rows(out / "summary.csv")
    assert {row["span"] for row in summary} == {*FIRE_STAGES, *PATH_SPANS}
    assert {row["client"] for row in summary} == set(KINDS)
    n = {(row["client"], row["span"]): int(row["n"]) for row in summary}
    assert n[("fire:shadow", "detect_fire")] == 3
    assert n[("fire:real", "detect_fire")] == 2
    assert n[("fire:real", "dispatch_ack")] == 2
    assert n[("burst:real", "detect_fire")] == 1
    assert n[("burst:shadow", "order_build")] == 200
    assert n[("fire:real", "path:decode_ack")] == 2  # the baseline writes the same breakdown
    assert ("fire:shadow", "path:decode_ack") not in n  # a shadow fire has no detect_wire
    assert ("fire:shadow", "dispatch_ack") not in n  # a shadow fire stops at its sent stamp
    warmups = {row["client"]: row["warmup"] for row in summary}
    assert warmups["fire:shadow"] == "1" and warmups["burst:real"] == "0"
    samples = _rows(out / "samples.csv")
    assert len(samples) == sum(n.values())
    assert not history.exists()  # fire rows never go to the history file


def _stage_db(path: Path, rows: list[tuple[str, str, bool]]) -> None:
    with contextlib.closing(open_database(str(path))) as connection, connection:
        for cid, stage, dry_run in rows:
            connection.execute("INSERT OR IGNORE INTO correlations VALUES (?, 0)", (cid,))
            metadata = '{"dry_run": true}' if dry_run else '{"dry_run": false}'
            connection.execute(
                "INSERT INTO latency_events (correlation_id, stage, started_at_ms, ended_at_ms,"
                " duration_ms, metadata_json) VALUES (?, ?, 0, 0, 0.5, ?)",
                (cid, stage, metadata),
            )


def _complete_rows(plan: FirePlan) -> list[tuple[str, str, bool]]:
    rows = []
    for phase, count in plan.expected().items():
        stage = "order_build" if phase == "burstshadow" else "detect_fire"
        rows += [(fire_cid(phase, i), stage, "real" not in phase) for i in range(count)]
    return rows


def test_completion_is_exact(work_dir: Path) -> None:
    """Exactly the planned rows complete; one short times out and one extra fails at once."""
    plan = FirePlan(warmup=1, shadow=2, real=1, bursts=1, burst_shadows=3)
    complete = _complete_rows(plan)
    exact = work_dir / "exact.db"
    _stage_db(exact, complete)
    assert len(wait_for_fire_rows(str(exact), plan, timeout=5.0)) == len(complete)
    short = work_dir / "short.db"
    _stage_db(short, complete[:-1])
    with pytest.raises(BenchError, match="short"):
        wait_for_fire_rows(str(short), plan, timeout=0.2)
    extra = work_dir / "extra.db"
    _stage_db(extra, [*complete, (fire_cid("real", 7), "detect_fire", False)])
    with pytest.raises(BenchError, match="more fire rows"):
        wait_for_fire_rows(str(extra), plan, timeout=5.0)


def test_a_row_whose_dry_run_contradicts_its_kind_is_an_error() -> None:
    """A real-phase row marked dry_run true is refused, and a consistent one is kept."""
    good = StageRow("real", "detect_fire", 900.0, False)
    assert series_of([good], 1, "x", 0)[0].client == "fire:real"
    with pytest.raises(BenchError, match="dry_run"):
        series_of([replace(good, dry_run=True)], 1, "x", 0)


def test_wire_ack_is_derived_per_fire_from_its_own_two_rows() -> None:
    """wire_ack is each fire's dispatch_ack minus its own dispatch_wire; none without both."""
    rows = [
        StageRow("real", "dispatch_ack", 900.0, False, "a"),
        StageRow("real", "dispatch_wire", 100.0, False, "a"),
        StageRow("real", "dispatch_wire", 50.0, False, "b"),
        StageRow("real", "dispatch_ack", 500.0, False, "b"),
        StageRow("real", "dispatch_ack", 700.0, False, "c"),
    ]
    by_span = {item.span: item.samples_us for item in series_of(rows, 1, "x", 0)}
    assert by_span[WIRE_ACK] == (800.0, 450.0)
    assert by_span["dispatch_wire"] == (100.0, 50.0)


def test_plan_helpers_interleave_and_name_phases() -> None:
    """Reals spread evenly among shadows; correlation ids round-trip to their phase."""
    assert interleaved(10, 2) == [False] * 5 + [True] + [False] * 5 + [True]
    assert interleaved(0, 2) == [True, True]
    assert interleaved(3, 0) == [False] * 3
    assert phase_of(fire_cid("burstreal", 4)) == "burstreal"
    assert phase_of("bench-blocking-000001") is None
    assert phase_of("fire-nonsense-000001") is None


def test_fire_environment_points_at_the_fake_and_raises_every_limit() -> None:
    """The executor environment is real mode on the fake, stale KALSHI_* dropped, gate open."""
    info = FakeExchangeInfo("https://127.0.0.1:1", "key", "/k.pem", "/ca.pem")
    env = fire_environment(info, {"PATH": "/bin", "KALSHI_ENVIRONMENT": "prod", "KALSHI_X": "1"})
    assert env["PATH"] == "/bin" and "KALSHI_X" not in env
    assert env["KALSHI_ENVIRONMENT"] == "demo"
    assert env["KALSHI_DEMO_BASE_URL"] == info.base_url
    assert env["KALSHI_API_KEY_ID"] == "key" and env["KALSHI_PRIVATE_KEY_PATH"] == "/k.pem"
    assert env["KALSHI_CA_FILE"] == "/ca.pem"
    assert env["KALSHI_ALLOWED_EXCHANGE_INDEXES"] == "0"
    assert env["KALSHI_RISK_GATE_ENABLED"] == "true"
    assert all(int(env[name]) >= 10**9 for name in RISK_VARIABLES)
    assert env["KALSHI_RISK_REFIRE_COOLDOWN_SECONDS"] == "0"
    # A run's real orders stay in the run's order group but never reach its limit.
    assert int(env["KALSHI_ORDER_GROUP_CONTRACTS_LIMIT"]) == MAX_ORDER_GROUP_CONTRACTS_LIMIT


def test_baseline_config_needs_both_credentials_and_demo() -> None:
    """No credentials is no-op fires; half of them, or prod, is a one-line error."""
    assert config_from_env({}) is None
    with pytest.raises(BaselineConfigError, match="KALSHI_PRIVATE_KEY_PATH"):
        config_from_env({"KALSHI_API_KEY_ID": "k"})
    both = {"KALSHI_API_KEY_ID": "k", "KALSHI_PRIVATE_KEY_PATH": "/k.pem"}
    with pytest.raises(BaselineConfigError, match="demo only"):
        config_from_env({**both, "KALSHI_ENVIRONMENT": "prod"})
    config = config_from_env({**both, "KALSHI_DEMO_BASE_URL": "https://127.0.0.1:9/"})
    assert config is not None and config.base_url == "https://127.0.0.1:9"


async def _baseline_fires(
    config: BaselineExchangeConfig, database: Path, wakes: list[WakeMessage]
) -> None:
    """Run the baseline's fire path on its own asyncio loop (in a worker thread) for ``wakes``."""

    async def fire_all() -> None:
        rows = RowWriter(str(database))
        try:
            async with open_fire_path(config, rows, lambda: PINNED_ORDER_ID) as path:
                for wake in wakes:
                    await path.fire(wake)
                assert path.counters.dispatch_errors == 0, path.counters.last_error
        finally:
            rows.close()

    await trio.to_thread.run_sync(asyncio.run, fire_all())


def _stages(database: Path) -> dict[str, list[str]]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        found: dict[str, list[str]] = {}
        for cid, stage in connection.execute(
            "SELECT correlation_id, stage FROM latency_events ORDER BY id"
        ):
            found.setdefault(cid, []).append(stage)
    return found


async def _fake(nursery: trio.Nursery, directory: Path) -> tuple[FakeCredentials, FakeExchange]:
    credentials = await trio.to_thread.run_sync(FakeCredentials.generate, directory / "cred")
    exchange: FakeExchange = await nursery.start(serve_fake_exchange, credentials)
    return credentials, exchange


async def test_baseline_sends_the_transports_body_bytes_and_headers(
    nursery: trio.Nursery, work_dir: Path
) -> None:
    """The baseline's real order is order_body's bytes with the Trio transport's Kalshi headers."""
    credentials, exchange = await _fake(nursery, work_dir)
    config = BaselineExchangeConfig(
        exchange.base_url, credentials.key_id, credentials.private_key_path, credentials.ca_file
    )
    with trio.fail_after(WAIT_S):
        await _baseline_fires(
            config,
            work_dir / "b.db",
            [
                _fire_wake("fire-real-000000", dry_run=False),
                _fire_wake("fire-shadow-000000", dry_run=True),
            ],
        )
    orders = [r for r in exchange.received if r.path.endswith("/orders")]
    assert len(orders) == 1  # the shadow fire signed but sent nothing
    baseline = orders[0]
    expected = order_body(
        OrderSpec(
            ticker="KXBTCD-26DEC31-T100000",
            client_order_id=PINNED_ORDER_ID,
            side="bid",
            count=1,
            price="0.5500",
            time_in_force="fill_or_kill",
            self_trade_prevention_type="taker_at_cross",
            exchange_index=0,
        )
    )
    assert baseline.body == expected
    assert baseline.verified and baseline.status == 201 and baseline.method == "POST"
    signer = await trio.to_thread.run_sync(
        KalshiSigner, credentials.private_key_path, credentials.key_id
    )
    endpoint = ExchangeEndpoint(exchange.base_url, credentials.key_id, signer, credentials.ca_file)
    with trio.fail_after(WAIT_S):
        async with open_exchange(endpoint) as client:
            # The same client_order_id again: the fake refuses it (409), having received it.
            with pytest.raises(ExchangeError, match=r"^409 "):
                await client.place_order(expected, OrderStamps(), dry_run=False)
    transport = [r for r in exchange.received if r.path.endswith("/orders")][-1]
    assert transport.body == baseline.body
    kalshi = ("kalshi-access-key", "content-type")
    assert {k: baseline.headers[k] for k in kalshi} == {k: transport.headers[k] for k in kalshi}
    assert baseline.headers["kalshi-access-timestamp"].isdigit()
    stages = _stages(work_dir / "b.db")
    assert stages["fire-real-000000"] == list(READ_STAGES)
    assert stages["fire-shadow-000000"] == ["order_build", "sign", "dispatch_send", "detect_fire"]


async def test_detect_fire_is_absent_when_the_clock_domain_differs(
    nursery: trio.Nursery, work_dir: Path
) -> None:
    """A wake stamped on another clock still fires but leaves no detect_fire row."""
    credentials, exchange = await _fake(nursery, work_dir)
    config = BaselineExchangeConfig(
        exchange.base_url, credentials.key_id, credentials.private_key_path, credentials.ca_file
    )
    wakes = [
        _fire_wake("fire-real-000001", dry_run=False, domain="elsewhere:0"),
        _fire_wake("fire-shadow-000001", dry_run=True, domain=""),
    ]
    with trio.fail_after(WAIT_S):
        await _baseline_fires(config, work_dir / "b.db", wakes)
    stages = _stages(work_dir / "b.db")
    real = ["order_build", "sign", "dispatch_send", "dispatch_ack", "dispatch_wire"]
    assert stages["fire-real-000001"] == real
    assert stages["fire-shadow-000001"] == ["order_build", "sign", "dispatch_send"]
    assert any(r.path.endswith("/orders") and r.status == 201 for r in exchange.received)


def test_picture_gives_each_executor_one_colour_and_each_kind_one_style() -> None:
    """Colours depend on the executor alone and styles on the client alone, all distinct."""
    series = [
        Series(1, executor, client, span, 0, (1.0, 2.0))
        for executor in ("uvloop", "trio", "cmd:x")
        for client in KINDS
        for span in ("sign", "detect_fire")
    ]
    colours, styles = plot_styles(series)
    assert set(colours) == {"trio", "uvloop", "cmd:x"}
    assert len(set(colours.values())) == 3 and colours["trio"] == "tab:orange"
    assert set(styles) == set(KINDS) and len(set(styles.values())) == len(KINDS)
    assert plot_styles(list(reversed(series))) == (colours, styles)  # order-independent


def test_tiny_fire_run_reads_the_trio_executors_own_stage_rows(work_dir: Path) -> None:
    """The Trio executor in real mode against the fake completes exactly, with only stage spans."""
    out = work_dir / "r"
    argv = ["--fire-only", "--executors", "trio", "--runs", "1", "--fire-warmup", "1"]
    argv += ["--fire-shadow", "2", "--fire-real", "2", "--fire-bursts", "0", "--no-history"]
    assert main([*argv, *UNPINNED, "--out", str(out)]) == 0
    summary = _rows(out / "summary.csv")
    assert {row["span"] for row in summary} == {*FIRE_STAGES, *PATH_SPANS}
    n = {(row["client"], row["span"]): int(row["n"]) for row in summary}
    assert n[("fire:shadow", "detect_fire")] == 2 and n[("fire:real", "detect_fire")] == 2
    assert n[("fire:real", "dispatch_ack")] == 2  # every real order was answered by the fake
    assert ("fire:shadow", "dispatch_ack") not in n
    # Each real fire's segments add up to its own detect_wire (rounded to 0.1 us per stamp).
    samples = [row for row in _rows(out / "samples.csv") if row["client"] == "fire:real"]
    for index in ("0", "1"):
        of_fire = {r["span"]: float(r["duration_us"]) for r in samples if r["index"] == index}
        parts = sum(of_fire[span] for span in PATH_SPANS)
        assert parts == pytest.approx(of_fire["detect_wire"], abs=1.0)


def test_a_burst_real_apart_run_completes_exactly(work_dir: Path) -> None:
    """--fire-burst-real-apart: each burst's real wake goes on a second connection once the
    burst is acked; the trio executor against the fake still completes every planned row."""
    plan = FirePlan(warmup=0, shadow=0, real=0, bursts=1, burst_real_apart=True)
    assert plan.argv()[-1] == "--burst-real-apart"
    assert "--burst-real-apart" not in FirePlan().argv()
    out = work_dir / "r"
    argv = ["--fire-only", "--executors", "trio", "--runs", "1", "--fire-warmup", "1"]
    argv += ["--fire-shadow", "1", "--fire-real", "1", "--fire-bursts", "1"]
    argv += ["--fire-burst-real-apart", "--no-history"]
    assert main([*argv, *UNPINNED, "--out", str(out)]) == 0
    n = {(row["client"], row["span"]): int(row["n"]) for row in _rows(out / "summary.csv")}
    assert n[("burst:real", "detect_wire")] == 1
    assert n[("burst:real", "dispatch_ack")] == 1  # the order on the second connection answered
    assert n[("burst:shadow", "order_build")] == 200


def _record_and_ack(listener: socket.socket, seen: list[tuple[int, str]]) -> None:
    """A stand-in executor: two connections, one after the other accepted; every frame's
    (connection number, correlation id) kept and acked, until both ends close."""
    peers = [listener.accept()[0] for _ in range(2)]
    readers = [peer.makefile("rb") for peer in peers]

    def serve(number: int) -> None:
        while prefix := readers[number].read(4):
            message = decode_wake_message(readers[number].read(int.from_bytes(prefix, "big")))
            seen.append((number, message.correlation_id))
            peers[number].sendall(encode_accepted_ack(message.correlation_id, 0))

    threads = [threading.Thread(target=serve, args=(number,)) for number in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for reader, peer in zip(readers, peers, strict=True):
        reader.close()
        peer.close()


def test_a_burst_real_apart_goes_on_the_second_connection_after_the_burst(
    work_dir: Path,
) -> None:
    """With burst_real_apart the burst's shadows go on the first connection and its real wake,
    written after their acks, on the second."""
    path = str(work_dir / "x.sock")
    seen: list[tuple[int, str]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(2)
        server = threading.Thread(target=_record_and_ack, args=(listener, seen))
        server.start()
        plan = FirePlan(warmup=0, shadow=0, real=0, bursts=1, burst_shadows=3)
        run_plan(path, replace(plan, burst_real_apart=True), clock_domain())
        server.join(timeout=30)
    shadows = [(0, fire_cid("burstshadow", i)) for i in range(3)]
    assert seen == [*shadows, (1, fire_cid("burstreal", 0))]


def _holding(count: int, fired: list[str]) -> FireHandoff:
    handoff = FireHandoff(lambda message, *stamps: fired.append(message.correlation_id), check_ns=0)
    wakes = [make_wake(f"s{i}", dry_run=True) for i in range(count)]
    handoff.hold_shadows([(decode_wake(encode_frame(wake)[4:]), 1, 0, 2) for wake in wakes])
    return handoff


def test_the_hand_off_variants_change_what_they_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each hand-off variant, applied in this process (the originals restored after), behaves as
    its description says where the product differs: flush-all starts every held shadow once
    caught up (the product takes turns), no-shadow-hold starts them while frames wait (the
    product holds them), shadows-ignore-others never sees another connection waiting."""
    monkeypatch.setattr(FireHandoff, "start_shadows", FireHandoff.start_shadows)
    monkeypatch.setattr(session, "another_connection_waiting", session.another_connection_waiting)
    fired: list[str] = []
    VARIANTS["flush-all"]()
    handoff = _holding(3, fired)
    assert not handoff.start_shadows(more_frames_waiting=lambda: True)
    assert fired == []
    handoff.start_shadows(more_frames_waiting=lambda: False, others_waiting=lambda: True)
    assert fired == ["s0", "s1", "s2"]
    VARIANTS["no-shadow-hold"]()
    fired.clear()
    _holding(2, fired).start_shadows(more_frames_waiting=lambda: True)
    assert fired == ["s0", "s1"]

    class Busy:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        idle = False

    try:
        assert session.another_connection_waiting([Busy(), Busy()], Busy())
        VARIANTS["shadows-ignore-others"]()
        assert not session.another_connection_waiting([Busy(), Busy()], Busy())
    finally:
        Busy.sock.close()


def test_variants_refuse_an_unknown_name() -> None:
    """bench.experiments.variants names its variants and refuses anything else before starting
    one."""
    assert set(VARIANTS) == {
        "idle-lane",
        "no-intent",
        "timed-intent",
        "httpx-orders",
        "chunked-rows",
        "acks-per-frame",
        "acks-per-batch",
        "switch-1ms",
        "switch-0.2ms",
        "h11-responses",
        "task-writes",
        "no-shadow-hold",
        "all-before-write",
        "flush-all",
        "shadows-ignore-others",
        "eager-refill",
    }
    assert variants_main(["idle-lane+nonsense", "serve"]) == 2
    assert variants_main([]) == 2


def test_the_order_wire_ab_runs_both_streams_against_the_fake(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tiny A/B round sends answered orders over both TLS streams and prints their ratios."""
    assert order_wire_main(["--rounds", "2", "--orders", "3", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("stdlib:") == 2 and out.count("trio:") == 2
    assert "wire p50: stdlib" in out and "ratio" in out


async def test_the_intent_variants_turn_the_record_off_and_time_it(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``no-intent`` leaves the journal untouched by a real order's record; ``timed-intent``
    keeps the record and writes one duration per record to ``$TIMED_INTENT_OUT`` at exit."""
    monkeypatch.setattr(Telemetry, "record_intent", Telemetry.record_intent)  # restored after
    at_exit: list[Any] = []
    monkeypatch.setattr("atexit.register", at_exit.append)
    out = short_dir / "durations.txt"
    monkeypatch.setenv("TIMED_INTENT_OUT", str(out))
    VARIANTS["timed-intent"]()
    async with running_telemetry(short_dir / "t.db", intent_journal=True) as telemetry:
        telemetry.record_intent(row_record_fields(order_row(client_order_id="a" * 32)))
        telemetry.record_intent(row_record_fields(order_row(client_order_id="b" * 32)))
        assert len(read_journal(journal_path(short_dir / "t.db")).rows) == 2
    (write_out,) = at_exit
    write_out()
    assert [int(line) > 0 for line in out.read_text().splitlines()] == [True, True]
    VARIANTS["no-intent"]()
    async with running_telemetry(short_dir / "u.db", intent_journal=True) as telemetry:
        telemetry.record_intent(row_record_fields(order_row()))
        assert read_journal(journal_path(short_dir / "u.db")).rows == []


async def test_the_all_before_write_variant_does_it_all_before_the_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``all-before-write`` puts the risk gate's attempt and the pending row's queueing back
    before the request is written (the product does both after): the A/B's other side does what
    it says."""
    monkeypatch.setattr(OrderDispatcher, "begin", OrderDispatcher.begin)  # restored after
    VARIANTS["all-before-write"]()
    risk = RiskGate(RiskLimits(), allowed_exchange_indexes=frozenset({0}))
    attempts_at_send: list[int] = []
    placer = StartingPlacer([])
    send_now = placer.send_order_now

    def counting(body: bytes, stamps: Any) -> Any:
        attempts_at_send.append(risk.in_flight)
        return send_now(body, stamps)

    placer.send_order_now = counting  # type: ignore[method-assign]
    async with order_harness(placer=placer, risk=risk) as harness:
        await harness.fire_path.fire(make_wake("c-1", exchange_index=0))
    kinds = [kind for kind, _ in harness.events if kind in {"intent", "pending", "send"}]
    assert kinds == ["intent", "pending", "send"]
    assert attempts_at_send == [1]


def test_a_pinned_run_places_the_fake_exchange_with_the_clients() -> None:
    """``FakeExchangeProcess.place`` moves every thread of the fake to the CPUs given, and an empty
    set gives it back every CPU the harness may use (an unpinned run)."""
    allowed = frozenset(os.sched_getaffinity(0))
    one = frozenset({min(allowed)})
    with FakeExchangeProcess() as fake:
        pid = fake._process.pid
        fake.place(one)
        threads = os.listdir(f"/proc/{pid}/task")
        assert threads and all(os.sched_getaffinity(int(tid)) == one for tid in threads)
        fake.place(frozenset())
        assert all(os.sched_getaffinity(int(tid)) == allowed for tid in threads)


def test_fire_ratio_lines_divide_within_one_placement() -> None:
    """Trio is compared with the other executors of its own placement only: ``trio@pinned`` is
    the reference of a pinned executor, and trio is never divided by itself elsewhere."""

    def series(executor: str, value: float) -> Series:
        return Series(1, executor, "fire:real", "detect_wire", 0, (value,) * 10)

    lines = fire_lines(
        [
            series("trio", 100.0),
            series("uvloop", 400.0),
            series("trio@pinned", 300.0),
            series("uvloop@pinned", 600.0),
        ],
        [],
    )
    ratios = [line.strip() for line in lines if "detect_wire p50:" in line]
    assert ratios == [
        "trio / uvloop  fire:real    detect_wire p50: 0.250x",
        "trio@pinned / uvloop@pinned  fire:real    detect_wire p50: 0.500x",
    ]
