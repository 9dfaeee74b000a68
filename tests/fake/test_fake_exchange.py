"""The fake exchange (DISPATCH.md §9): credentials, authentication, orders, account, faults, CLI.

Requests go over real TLS on 127.0.0.1: through the transport where a signed request is wanted, and
through a bare httpx client (trusting the fake's CA) where the test needs to send what the
transport never would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from structlog.testing import capture_logs

from executor.exchange.orders.transport import (
    BALANCE_PATH,
    ORDER_PATH,
    ExchangeAmbiguous,
    ExchangeClient,
    ExchangeError,
    OrderSpec,
    OrderStamps,
    order_body,
)
from executor.fake.book.account import ORDER_EXISTS_CODE, ORDER_EXISTS_MESSAGE, FakeAccount
from executor.fake.cli import main as fake_main
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault, never_fill
from executor.signer import KalshiSigner
from tests.support.openapi import validate_response
from tests.support.orders import spec, transport


@asynccontextmanager
async def bare_client(
    exchange: FakeExchange, credentials: FakeCredentials
) -> AsyncIterator[httpx.AsyncClient]:
    """An unsigned httpx client that trusts the fake's CA."""
    context = ssl.create_default_context(cafile=str(credentials.ca_file))
    async with httpx.AsyncClient(base_url=exchange.base_url, verify=context) as client:
        yield client


async def place(client: ExchangeClient, order: OrderSpec) -> dict[str, Any]:
    return await client.place_order(order_body(order), OrderStamps(), dry_run=False)


def test_generated_credentials_are_private_and_usable(tmp_path: Path) -> None:
    """The key is an RSA-2048 PKCS#8 PEM readable only by its owner; the CA is a PEM cert."""
    credentials = FakeCredentials.generate(tmp_path / "world")
    assert stat.S_IMODE(credentials.private_key_path.stat().st_mode) == 0o600
    pem = credentials.private_key_path.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    assert credentials.server_pem is not None
    assert stat.S_IMODE(credentials.server_pem.stat().st_mode) == 0o600
    ssl.create_default_context(cafile=str(credentials.ca_file))  # loads as a trust anchor
    assert KalshiSigner(credentials.private_key_path).public_key().public_numbers() == (
        credentials.public_key().public_numbers()
    )


async def test_a_fill_or_kill_order_fills_in_full(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The default rule fills: fill_count = count, nothing remaining, price and fee as strings."""
    async with transport(fake_exchange, fake_credentials) as client:
        response = await place(client, spec())
    assert response["fill_count"] == "3.00"
    assert response["remaining_count"] == "0.00"
    assert response["average_fill_price"] == "0.4200"
    assert response["average_fee_paid"] == "0.0200"
    assert str(uuid.UUID(response["order_id"])) == response["order_id"]  # a UUID, as Kalshi's are
    assert fake_exchange.positions == {"KXTEST-26JAN01-T1": 3.0}


async def test_the_fill_rule_can_kill_an_order(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A killed order fills nothing, leaves the whole count and moves no money."""
    fake_exchange.fill_rule = never_fill
    async with transport(fake_exchange, fake_credentials) as client:
        response = await place(client, spec())
    assert (response["fill_count"], response["remaining_count"]) == ("0.00", "3.00")
    assert "average_fill_price" not in response
    assert fake_exchange.balance_cents == 100_000
    assert fake_exchange.positions == {}


async def test_a_good_till_canceled_order_rests(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A post-only GTC order rests unfilled even though the rule would fill it."""
    async with transport(fake_exchange, fake_credentials) as client:
        response = await place(client, spec(time_in_force="good_till_canceled"))
    assert fake_exchange.book["a" * 32].status == "resting"
    assert (response["fill_count"], response["remaining_count"]) == ("0.00", "3.00")


async def test_the_fill_rule_sees_the_order_json(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The rule is given the parsed order, so a test can fill one ticker and kill another."""
    fake_exchange.fill_rule = lambda order: order["ticker"].endswith("FILL")
    async with transport(fake_exchange, fake_credentials) as client:
        filled = await place(client, spec("1" * 32, ticker="KX-FILL"))
        killed = await place(client, spec("2" * 32, ticker="KX-KILL"))
    assert (filled["fill_count"], killed["fill_count"]) == ("3.00", "0.00")


async def test_fills_debit_the_balance_and_build_signed_positions(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A yes fill costs count x price, a no fill count x (1 - price), each plus its fee."""
    async with transport(fake_exchange, fake_credentials) as client:
        await place(client, spec("1" * 32, count=2, price="0.3000"))
        await place(client, spec("2" * 32, side="ask", count=5, price="0.3000"))
        balance = await client.get_balance_cents()
        positions = await client.get_positions()
    fee_cents = 2  # ceil(0.07 * 0.3 * 0.7 * 100) per contract
    assert balance == 100_000 - (2 * 30 + 2 * fee_cents) - (5 * 70 + 5 * fee_cents)
    assert fake_exchange.positions == {"KXTEST-26JAN01-T1": -3.0}
    assert positions == {"KXTEST-26JAN01-T1": 3.0}


async def test_a_fill_beyond_the_balance_is_refused(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """An account that cannot pay answers 400 with the exchange's error body."""
    fake_exchange.balance_cents = 100
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeError, match=r"^400 insufficient_balance: "):
            await place(client, spec())
    assert fake_exchange.balance_cents == 100


async def test_a_repeated_client_order_id_is_a_409_and_places_nothing(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Placing one client_order_id twice answers the second with 409 "already exists", as
    Kalshi does, and the account moves once."""
    async with transport(fake_exchange, fake_credentials) as client:
        first = await place(client, spec())
        balance = fake_exchange.balance_cents
        with pytest.raises(ExchangeError) as caught:
            await place(client, spec())
    assert caught.value.status == 409
    assert str(caught.value) == f"409 {ORDER_EXISTS_CODE}: {ORDER_EXISTS_MESSAGE}"
    assert fake_exchange.orders["a" * 32] == first
    assert fake_exchange.balance_cents == balance
    assert fake_exchange.positions == {"KXTEST-26JAN01-T1": 3.0}


async def test_the_duplicate_fault_places_once_and_answers_the_repeat(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A request delivered twice places the order once; the client hears the repeat's 409."""
    fake_exchange.inject(Fault("duplicate"))
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeError) as caught:
            await place(client, spec())
    assert caught.value.status == 409
    assert "a" * 32 in fake_exchange.orders
    assert fake_exchange.positions == {"KXTEST-26JAN01-T1": 3.0}
    assert (fake_exchange.received[-1].fault, fake_exchange.received[-1].status) == (
        "duplicate",
        409,
    )


async def test_a_latency_fault_delays_the_answer(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The answer comes no sooner than the injected latency, and is a normal fill."""
    fake_exchange.inject(Fault("latency", seconds=0.3))
    async with transport(fake_exchange, fake_credentials) as client:
        start = trio.current_time()
        response = await place(client, spec())
        elapsed = trio.current_time() - start
    assert elapsed >= 0.3
    assert response["fill_count"] == "3.00"


async def test_a_status_fault_answers_an_error_body(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """An injected status answers with {"code", "message"} and places nothing."""
    fake_exchange.inject(Fault("status", status=418, code="rate_limited", message="slow down"))
    async with transport(fake_exchange, fake_credentials) as client:
        with pytest.raises(ExchangeError, match=r"^418 rate_limited: slow down$"):
            await place(client, spec())
    assert fake_exchange.orders == {}


async def test_faults_apply_to_order_requests_only(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A queued fault waits for an order: balance reads pass it by."""
    async with transport(fake_exchange, fake_credentials) as client:
        fake_exchange.inject(Fault("status", status=400))
        assert await client.get_balance_cents() == 100_000
        with pytest.raises(ExchangeError):
            await place(client, spec())


async def test_unsigned_and_foreign_requests_get_401(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Missing headers or an unknown key id are refused before anything else."""
    signer = KalshiSigner(fake_credentials.private_key_path, "someone-else")
    timestamp = str(time.time_ns() // 1_000_000)
    async with bare_client(fake_exchange, fake_credentials) as client:
        unsigned = await client.get(BALANCE_PATH)
        foreign = await client.get(
            BALANCE_PATH, headers=signer.headers(timestamp, "GET", BALANCE_PATH)
        )
    assert unsigned.status_code == foreign.status_code == 401
    assert unsigned.json()["code"] == "unauthorized"
    assert "unknown API key" in foreign.json()["message"]
    assert [r.verified for r in fake_exchange.received] == [False, False]


async def test_the_signature_covers_the_path_without_the_query(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A request signed over its path is accepted with a query string appended, not otherwise."""
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    timestamp = str(time.time_ns() // 1_000_000)
    positions = "/trade-api/v2/portfolio/positions"
    good = signer.headers(timestamp, "GET", positions)
    bad = signer.headers(timestamp, "GET", positions + "?cursor=2")
    async with bare_client(fake_exchange, fake_credentials) as client:
        accepted = await client.get(positions + "?cursor=2", headers=good)
        refused = await client.get(positions + "?cursor=2", headers=bad)
    assert (accepted.status_code, refused.status_code) == (200, 401)


async def test_unknown_paths_and_methods_are_answered(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A signed request to a path the fake lacks gets 404; a wrong method gets 405."""
    signer = KalshiSigner(fake_credentials.private_key_path, fake_credentials.key_id)
    timestamp = str(time.time_ns() // 1_000_000)
    async with bare_client(fake_exchange, fake_credentials) as client:
        missing = await client.get("/nope", headers=signer.headers(timestamp, "GET", "/nope"))
        wrong = await client.get(ORDER_PATH, headers=signer.headers(timestamp, "GET", ORDER_PATH))
        garbage = await client.post(
            ORDER_PATH, content=b"{", headers=signer.headers(timestamp, "POST", ORDER_PATH)
        )
    assert (missing.status_code, wrong.status_code, garbage.status_code) == (404, 405, 400)


async def test_received_records_every_request_as_it_arrived(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Each request is kept with its method, path, lower-case headers, body and answer."""
    async with transport(fake_exchange, fake_credentials) as client:
        await place(client, spec())
    prewarm, order = fake_exchange.received
    assert (prewarm.method, prewarm.path, prewarm.body, prewarm.status) == (
        "GET",
        BALANCE_PATH,
        b"",
        200,
    )
    assert (order.method, order.status, order.body) == ("POST", 201, order_body(spec()))
    assert all(name == name.lower() for name in order.headers)


# --- the command --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start_command(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "executor.fake", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_the_command_prints_its_world_serves_and_exits_zero_on_a_signal(
    stop_signal: signal.Signals, tmp_path: Path
) -> None:
    """One JSON line names the URL, the stream's URL on the same port, key id, key and CA; it
    serves; a signal stops it with 0."""
    process = _start_command("--port", "0", "--dir", str(tmp_path), "--balance-cents", "4242")
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # bounded by the test timeout if the command hangs
        world = json.loads(line)
        assert set(world) == {"base_url", "stream_url", "key_id", "private_key_path", "ca_file"}
        host_port = world["base_url"].removeprefix("https://")
        assert world["stream_url"] == f"wss://{host_port}/trade-api/ws/v2"
        assert Path(world["private_key_path"]).parent == tmp_path
        signer = KalshiSigner(world["private_key_path"], world["key_id"])
        timestamp = str(time.time_ns() // 1_000_000)
        context = ssl.create_default_context(cafile=world["ca_file"])
        with httpx.Client(base_url=world["base_url"], verify=context, trust_env=False) as client:
            answer = client.get(
                BALANCE_PATH, headers=signer.headers(timestamp, "GET", BALANCE_PATH)
            )
        assert answer.json()["balance"] == 4242
        assert answer.json()["balance_dollars"] == "42.4200"
        process.send_signal(stop_signal)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_the_command_refuses_a_busy_port_in_one_line(tmp_path: Path) -> None:
    """A port already bound exits 1 with a single stderr line and no traceback."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "executor.fake", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        )
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fake exchange: ")
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # its temporary key directory is gone too


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_the_command_removes_its_temporary_directory_when_stopped(
    stop_signal: signal.Signals, tmp_path: Path
) -> None:
    """Without --dir, the throwaway key's temporary directory is removed when a signal stops it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "executor.fake", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        assert process.stdout is not None
        world = json.loads(process.stdout.readline())
        key = Path(world["private_key_path"])
        assert key.parent.parent == tmp_path and key.exists()
        process.send_signal(stop_signal)
        assert process.wait(timeout=30) == 0
        assert not key.parent.exists()
        assert list(tmp_path.iterdir()) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_a_given_directory_is_left_in_place(tmp_path: Path) -> None:
    """With --dir the credentials are the caller's: they stay after the fake stops."""
    process = _start_command("--port", "0", "--dir", str(tmp_path / "creds"))
    try:
        assert process.stdout is not None
        json.loads(process.stdout.readline())
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert (tmp_path / "creds" / "api-key.pem").exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("balance", ["-5", "lots", "1.5"])
def test_the_command_refuses_a_negative_or_malformed_balance(
    balance: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--balance-cents must be a whole number of cents, 0 or more: else a usage error, exit 2."""
    with pytest.raises(SystemExit) as caught:
        fake_main(["--port", "0", "--balance-cents", balance])
    assert caught.value.code == 2
    error = capsys.readouterr().err
    assert "--balance-cents" in error and "0 or more" in error


def test_the_command_prints_its_usage() -> None:
    """``python -m executor.fake --help`` (its one name) exits 0 with the fake's own usage."""
    result = subprocess.run(
        [sys.executable, "-m", "executor.fake", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "A local fake Kalshi exchange." in result.stdout
    assert "--port" in result.stdout


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_the_command_refuses_a_port_out_of_range(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port that is not 0-65535 is a usage error (exit 2) naming the value, not a bind."""
    with pytest.raises(SystemExit) as caught:
        fake_main(["--port", port])
    assert caught.value.code == 2
    assert "is not a TCP port" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"ticker":"T","client_order_id":"c","side":"bid","time_in_force":"fill_or_kill"}',
        b'{"ticker":"T","client_order_id":"c","side":"up","count":"1.00","price":"0.5",'
        b'"time_in_force":"fill_or_kill","self_trade_prevention_type":"maker"}',
        b'{"ticker":"T","client_order_id":"c","side":"bid","count":"NaN","price":"0.5",'
        b'"time_in_force":"fill_or_kill","self_trade_prevention_type":"maker"}',
        b'{"ticker":"T","client_order_id":"c","side":"bid","count":"1.00","price":"1.5",'
        b'"time_in_force":"fill_or_kill","self_trade_prevention_type":"maker"}',
        b'{"ticker":"T","side":"bid","count":"1.00","price":"0.5","time_in_force":"fill_or_kill"}',
        b'{"ticker":"T","side":"bid","count":"1.00","price":"0.5",'
        b'"time_in_force":"good_till_cancelled","self_trade_prevention_type":"maker"}',
        b'{"ticker":"T","side":"bid","count":"1.00","price":"0.5",'
        b'"time_in_force":"fill_or_kill","self_trade_prevention_type":"none"}',
        b'{"ticker":"T","client_order_id":7,"side":"bid","count":"1.00","price":"0.5",'
        b'"time_in_force":"fill_or_kill","self_trade_prevention_type":"maker"}',
        b'{"ticker":"T","side":"bid","count":"1.00","price":"0.5","exchange_index":"0",'
        b'"time_in_force":"fill_or_kill","self_trade_prevention_type":"maker"}',
    ],
)
def test_malformed_orders_are_a_400_never_a_crash(body: bytes) -> None:
    """Bodies that are not orders (bad JSON, missing, NaN, out-of-range or mistyped fields, an
    unpublished enum value) answer 400 in the published error shape."""
    status, payload = FakeAccount().answer("POST", ORDER_PATH, "", body)
    assert status == 400
    assert json.loads(payload)["code"] == "invalid_parameters"
    validate_response(ORDER_PATH, "POST", status, payload)


async def test_a_failing_connection_does_not_take_the_fake_down(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A bug while answering costs that connection only (the order is ambiguous: the fake may
    have applied it); the next request is served."""

    def broken_rule(order: dict[str, Any]) -> bool:
        raise RuntimeError("fill rule bug")

    fake_exchange.fill_rule = broken_rule
    async with transport(fake_exchange, fake_credentials) as client:
        with capture_logs() as logs, pytest.raises(ExchangeAmbiguous, match="connection lost"):
            await client.place_order(order_body(spec()), OrderStamps(), dry_run=False)
        assert await client.get_balance_cents() == 100_000
    assert any(entry["event"] == "fake exchange: connection failed" for entry in logs)
