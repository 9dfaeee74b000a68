"""The exchange transport (DISPATCH.md §5), end to end over real TLS against the fake exchange.

Every request here crosses a real TLS connection on 127.0.0.1 to ``executor.fake.exchange``, which
verifies signatures with the public key only. Pure pieces (body bytes, error texts, the retry
delay, the token bucket) are tested without sockets.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
import trustme
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from structlog.testing import capture_logs

import executor.exchange.messages as exchange_wire
import executor.exchange.orders.connection as order_connection
import executor.exchange.orders.pool as order_pool
import executor.exchange.orders.presign as presign
import executor.exchange.orders.template as order_template
import executor.exchange.orders.transport as exchange_module
import executor.exchange.rest as rest
import executor.exchange.token_bucket as token_bucket
import executor.fake.exchange as fake_module
from executor.exchange.orders.pool import ORDER_CONNECTIONS
from executor.exchange.orders.transport import (
    BALANCE_PATH,
    ORDER_PATH,
    POSITIONS_PATH,
    ExchangeAmbiguous,
    ExchangeEndpoint,
    ExchangeError,
    ExchangeTimeout,
    OrderSpec,
    OrderStamps,
    RetryPolicy,
    TokenBucket,
    error_text,
    open_exchange,
    order_body,
    parse_response,
)
from executor.fake.exchange import FakeCredentials, FakeExchange, Fault
from executor.signer import KalshiSigner
from tests.support.inprocess import fake_endpoint

CLIENT_ORDER_ID = "0123456789abcdef0123456789abcdef"
FAST_RETRY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.02)
"""The §5 policy with short delays, so retry tests do not sleep for long."""


def yes_spec(client_order_id: str = CLIENT_ORDER_ID, **overrides: Any) -> OrderSpec:
    """The DISPATCH.md §5 example order."""
    spec = OrderSpec(
        ticker="KXTEST",
        client_order_id=client_order_id,
        side="bid",
        count=3,
        price="0.4200",
        time_in_force="fill_or_kill",
        self_trade_prevention_type="taker_at_cross",
        exchange_index=2,
    )
    return replace(spec, **overrides)


def order_requests(exchange: FakeExchange) -> list[fake_module.ReceivedRequest]:
    return [r for r in exchange.received if r.path == ORDER_PATH]


def verifies(credentials: FakeCredentials, headers: dict[str, str], method: str, path: str) -> bool:
    """An independent PSS-SHA256 (salt 32) check of a request's signature header."""
    message = (headers["kalshi-access-timestamp"] + method + path).encode()
    signature = base64.b64decode(headers["kalshi-access-signature"], validate=True)
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
    try:
        credentials.public_key().verify(signature, message, pss, hashes.SHA256())
    except InvalidSignature:
        return False
    return True


class TamperingSigner(KalshiSigner):
    """Signs correctly, then flips one byte of the signature."""

    def sign(self, timestamp: str, method: str, path: str) -> str:
        raw = bytearray(base64.b64decode(super().sign(timestamp, method, path)))
        raw[0] ^= 0xFF
        return base64.b64encode(bytes(raw)).decode()


# --- the body: pure bytes -------------------------------------------------------------------


def test_yes_order_body_matches_the_spec_example_bytes() -> None:
    """A yes order is the §5 example, byte for byte."""
    expected = (
        b'{"ticker":"KXTEST","client_order_id":"0123456789abcdef0123456789abcdef","side":"bid",'
        b'"count":"3.00","price":"0.4200","time_in_force":"fill_or_kill",'
        b'"self_trade_prevention_type":"taker_at_cross","post_only":false,"exchange_index":2}'
    )
    assert order_body(yes_spec()) == expected


def test_no_order_body_keeps_the_yes_price_and_sets_post_only_for_gtc() -> None:
    """A no order is an ask at the YES price; good_till_canceled makes post_only true."""
    spec = yes_spec(
        ticker="KXBTCD-26AUG2917-T112750",
        side="ask",
        count=12,
        price="0.0700",
        time_in_force="good_till_canceled",
        self_trade_prevention_type="maker",
        exchange_index=-1,
    )
    expected = (
        b'{"ticker":"KXBTCD-26AUG2917-T112750","client_order_id":"0123456789abcdef0123456789abcdef",'
        b'"side":"ask","count":"12.00","price":"0.0700","time_in_force":"good_till_canceled",'
        b'"self_trade_prevention_type":"maker","post_only":true,"exchange_index":-1}'
    )
    assert order_body(spec) == expected


def test_the_executors_body_is_the_spec_example_then_the_pause_flag_and_the_group() -> None:
    """[ours] issue 22: the executor's body is §5's example byte for byte, then
    ``cancel_order_on_pause`` and ``order_group_id``, in that order; unset, neither is sent."""
    expected = (
        b'{"ticker":"KXTEST","client_order_id":"0123456789abcdef0123456789abcdef","side":"bid",'
        b'"count":"3.00","price":"0.4200","time_in_force":"fill_or_kill",'
        b'"self_trade_prevention_type":"taker_at_cross","post_only":false,"exchange_index":2,'
        b'"cancel_order_on_pause":true,"order_group_id":"og-1"}'
    )
    with_both = dataclasses.replace(yes_spec(), cancel_order_on_pause=True, order_group_id="og-1")
    assert order_body(with_both) == expected
    flag_only = dataclasses.replace(yes_spec(), cancel_order_on_pause=False)
    assert order_body(flag_only).endswith(b'"exchange_index":2,"cancel_order_on_pause":false}')


def test_order_body_refuses_a_count_below_one() -> None:
    """A zero count never reaches the wire."""
    with pytest.raises(ValueError, match="count"):
        order_body(yes_spec(count=0))


def test_transport_and_fake_agree_on_the_paths() -> None:
    """The fake serves the paths the transport calls (it spells them out independently)."""
    assert (ORDER_PATH, BALANCE_PATH, POSITIONS_PATH) == (
        fake_module.ORDER_PATH,
        fake_module.BALANCE_PATH,
        fake_module.POSITIONS_PATH,
    )


# --- error texts and parsing: pure -----------------------------------------------------------


def test_error_text_prefers_the_exchange_code_and_message() -> None:
    """An {"error": {code, message}} body gives "{status} {code}: {message}"."""
    body = b'{"error":{"code":"rate_limited","message":"slow down"}}'
    assert error_text(429, "Too Many Requests", body) == "429 rate_limited: slow down"


def test_error_text_reads_the_published_error_response() -> None:
    """The published ErrorResponse (code, message, details at the top level) gives the same
    text as the nested shape, with the details after the message."""
    body = b'{"code":"invalid_order","message":"bad price"}'
    assert error_text(400, "Bad Request", body) == "400 invalid_order: bad price"
    detailed = b'{"code":"invalid_order","message":"bad price","details":"tick is 0.01"}'
    assert error_text(400, "Bad Request", detailed) == (
        "400 invalid_order: bad price (tick is 0.01)"
    )
    assert error_text(409, "Conflict", b'{"code":"duplicate"}') == "409 duplicate"
    assert error_text(401, "Unauthorized", b'{"message":"no key"}') == "401 Unauthorized: no key"


def test_error_text_reads_an_error_string() -> None:
    """{"error": "text"} (the published 429 example) gives the text after the reason."""
    body = b'{"error": "too many requests"}'
    assert error_text(429, "Too Many Requests", body) == "429 Too Many Requests: too many requests"


def test_error_text_quotes_other_bodies_and_falls_back_to_the_reason() -> None:
    """A non-error body is quoted after the reason; an empty body leaves the reason alone."""
    assert error_text(502, "Bad Gateway", b"upstream down\n") == "502 Bad Gateway: upstream down"
    assert error_text(503, "Service Unavailable", b"") == "503 Service Unavailable"
    assert error_text(400, "Bad Request", b'{"error":7}') == '400 Bad Request: {"error":7}'
    assert error_text(500, "Internal Server Error", b'{"code":""}') == (
        '500 Internal Server Error: {"code":""}'
    )


def _response(status: int, content: bytes) -> httpx.Response:
    return httpx.Response(status, content=content, request=httpx.Request("POST", "https://x"))


def test_parse_response_reads_json_objects_and_empty_bodies() -> None:
    """A 2xx JSON object is returned; an empty 2xx body is {}."""
    assert parse_response(_response(201, b'{"order_id":"o1"}')) == {"order_id": "o1"}
    assert parse_response(_response(200, b"")) == {}


def test_parse_response_refuses_non_json_2xx_and_error_statuses() -> None:
    """A 2xx body that is not a JSON object is an error, as is any status >= 400."""
    with pytest.raises(ExchangeError, match="200 OK: response is not JSON"):
        parse_response(_response(200, b"<html>"))
    with pytest.raises(ExchangeError, match="not a JSON object"):
        parse_response(_response(200, b"[1]"))
    with pytest.raises(ExchangeError) as caught:
        parse_response(_response(404, b""))
    assert str(caught.value) == "404 Not Found"
    assert caught.value.status == 404


def test_retry_delay_follows_the_formula_and_the_cap() -> None:
    """Delay before attempt k+1 is min(2, 0.25 * 2**(k-1)) scaled by 0.5 + jitter/2."""
    policy = RetryPolicy()
    assert policy.delay_s(1, 0.0) == pytest.approx(0.125)
    assert policy.delay_s(1, 1.0) == pytest.approx(0.25)
    assert policy.delay_s(2, 0.5) == pytest.approx(0.5 * 0.75)
    assert policy.delay_s(6, 1.0) == pytest.approx(2.0)
    assert policy.max_attempts == 3
    assert policy.retry_statuses == {429, 500, 502, 503, 504}


def test_retry_policy_never_retries_a_timeout() -> None:
    """Timeouts are ambiguous, connection errors and the listed statuses are retryable."""
    policy = RetryPolicy()
    assert not policy.retryable(ExchangeTimeout("no response"))
    assert policy.retryable(ExchangeError("connection error"))
    assert policy.retryable(ExchangeError("503", status=503))
    assert not policy.retryable(ExchangeError("400", status=400))


# --- the token bucket: pure Trio, virtual clock -------------------------------------------------


async def test_bucket_serves_a_burst_then_waits_for_the_refill(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ten orders go at once from a full bucket; the eleventh waits 0.1 s for 10 tokens."""
    bucket = TokenBucket()
    start = trio.current_time()
    for _ in range(10):
        await bucket.acquire(10)
    assert trio.current_time() == start
    await bucket.acquire(10)
    assert trio.current_time() - start == pytest.approx(0.1)


async def test_bucket_refills_up_to_its_capacity_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A long idle spell refills the bucket to 100 tokens, never beyond."""
    bucket = TokenBucket()
    await bucket.acquire(100)
    assert bucket.available() == pytest.approx(0)
    await trio.sleep(0.05)
    assert bucket.available() == pytest.approx(5)
    await trio.sleep(60)
    assert bucket.available() == 100


async def test_bucket_waiters_are_served_first_come_first_served(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A small request queued behind a large one waits its turn instead of overtaking it."""
    bucket = TokenBucket()
    await bucket.acquire(100)
    served: list[str] = []

    async def take(name: str, tokens: float) -> None:
        await bucket.acquire(tokens)
        served.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, "big", 100)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(take, "small-1", 10)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(take, "small-2", 10)
    assert served == ["big", "small-1", "small-2"]


async def test_a_cancelled_waiter_takes_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """Giving up in line leaves the bucket's tokens for the next caller."""
    bucket = TokenBucket()
    await bucket.acquire(100)
    with trio.move_on_after(0.05):
        await bucket.acquire(50)
    assert bucket.available() == pytest.approx(5)


def test_bucket_refuses_a_request_larger_than_its_capacity() -> None:
    """Asking for more than the bucket holds would wait forever; it is refused instead."""
    with pytest.raises(ValueError):
        trio.run(TokenBucket(capacity=10).acquire, 11)


# --- over TLS against the fake ----------------------------------------------------------------


async def test_open_exchange_prewarms_before_yielding(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """By the time the client is handed out, the fake has answered one signed balance request
    and the order connections are open and handshaken."""
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            assert [(r.method, r.path, r.status) for r in fake_exchange.received] == [
                ("GET", BALANCE_PATH, 200)
            ]
            assert client.orders.idle == client.orders.opened == ORDER_CONNECTIONS


async def test_open_exchange_without_prewarm_sends_nothing(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The negative twin: with pre-warming off, the fake has seen nothing."""
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials), prewarm=False):
            assert fake_exchange.received == []
            assert fake_exchange.connections_opened == 0


async def test_order_sends_the_exact_body_and_headers(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The fake receives the body bytes unchanged and the three Kalshi headers plus JSON type."""
    body = order_body(yes_spec())
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            response = await client.place_order(body, OrderStamps(), dry_run=False)
    (received,) = order_requests(fake_exchange)
    assert received.method == "POST"
    assert received.body == body
    assert received.headers["kalshi-access-key"] == fake_credentials.key_id
    assert received.headers["kalshi-access-timestamp"].isdigit()
    assert received.headers["content-type"] == "application/json"
    assert received.verified and received.status == 201
    assert verifies(fake_credentials, received.headers, "POST", ORDER_PATH)
    assert not verifies(fake_credentials, received.headers, "POST", BALANCE_PATH)
    assert response["fill_count"] == "3.00"
    assert response["order_id"]


async def test_a_tampered_signature_gets_401_and_is_not_retried(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A signature that does not verify is refused with the exchange's code and message."""
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    endpoint = replace(endpoint, signer=TamperingSigner(fake_credentials.private_key_path))
    with trio.fail_after(10):
        async with open_exchange(endpoint, prewarm=False) as client:
            with pytest.raises(ExchangeError) as caught:
                await client.place_order(order_body(yes_spec()), OrderStamps(), dry_run=False)
    assert str(caught.value) == "401 unauthorized: signature does not verify"
    assert caught.value.status == 401
    (received,) = order_requests(fake_exchange)
    assert not received.verified


async def test_a_stale_timestamp_is_refused_with_the_error_text(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A correctly signed but ten-second-old timestamp gets 401 and the §5 text."""
    real_wall_ms = exchange_module.wall_ms
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            monkeypatch.setattr(exchange_module, "wall_ms", lambda: real_wall_ms() - 10_000)
            with pytest.raises(ExchangeError) as caught:
                await client.place_order(order_body(yes_spec()), OrderStamps(), dry_run=False)
    assert str(caught.value) == "401 unauthorized: stale timestamp (more than 5 s from now)"
    (received,) = order_requests(fake_exchange)
    assert received.verified and received.status == 401


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_retryable_statuses_are_retried_with_a_fresh_signature(
    status: int, fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """After a 429/5xx the same body is re-signed with a new timestamp and sent again."""
    fake_exchange.inject(Fault("status", status=status))
    stamps = OrderStamps()
    body = order_body(yes_spec())
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(10), capture_logs() as logs:
        async with open_exchange(endpoint, retry=FAST_RETRY) as client:
            response = await client.place_order(body, stamps, dry_run=False)
    first, second = order_requests(fake_exchange)
    assert (first.status, second.status) == (status, 201)
    assert first.body == second.body == body
    assert int(second.headers["kalshi-access-timestamp"]) > int(
        first.headers["kalshi-access-timestamp"]
    )
    assert second.headers["kalshi-access-signature"] != first.headers["kalshi-access-signature"]
    assert stamps.attempts == 2
    assert response["client_order_id"] == CLIENT_ORDER_ID
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 1 and warnings[0]["attempt"] == 1


async def test_a_client_error_is_not_retried(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A 400 is final after one request, with the exchange's code and message."""
    fake_exchange.inject(Fault("status", status=400, code="invalid_order", message="bad price"))
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            with pytest.raises(ExchangeError, match=r"^400 invalid_order: bad price$"):
                await client.place_order(order_body(yes_spec()), OrderStamps(), dry_run=False)
    assert len(order_requests(fake_exchange)) == 1


async def test_three_failures_give_up_with_the_last_error(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Three retryable failures in a row end the order with the third one's error."""
    fake_exchange.inject(*[Fault("status", status=503)] * 3)
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=FAST_RETRY
        ) as client:
            with pytest.raises(ExchangeError) as caught:
                await client.place_order(order_body(yes_spec()), stamps, dry_run=False)
    assert caught.value.status == 503
    assert str(caught.value) == "503 service_unavailable: injected fault"
    assert len(order_requests(fake_exchange)) == 3
    assert stamps.attempts == 3


async def test_a_connection_dropped_after_the_request_is_ambiguous_and_never_retried(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A connection closed unanswered after the order was written is ExchangeAmbiguous, sent once;
    the next order goes out on another connection."""
    fake_exchange.inject(Fault("drop", place=True))
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=FAST_RETRY
        ) as client:
            with pytest.raises(ExchangeAmbiguous, match="after the order was sent"):
                await client.place_order(order_body(yes_spec()), stamps, dry_run=False)
            assert stamps.attempts == 1 and stamps.wire_ns is not None and stamps.ack_ns is None
            assert not FAST_RETRY.retryable(ExchangeAmbiguous("x"))
            spec = yes_spec(client_order_id="f" * 32)
            response = await client.place_order(order_body(spec), OrderStamps(), dry_run=False)
    first, second = order_requests(fake_exchange)
    assert (first.status, second.status) == (None, 201)
    assert first.connection != second.connection
    assert response["fill_count"] == "3.00"


async def test_a_hang_times_out_once_and_is_never_retried(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """No answer in 2 s raises ExchangeTimeout after exactly one request; the next order works."""
    fake_exchange.inject(Fault("hang", place=True))
    stamps = OrderStamps()
    with trio.fail_after(20):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            with pytest.raises(ExchangeTimeout) as caught:
                await client.place_order(order_body(yes_spec()), stamps, dry_run=False)
            assert len(order_requests(fake_exchange)) == 1
            assert caught.value.status is None
            assert stamps.attempts == 1
            assert stamps.sent_ns is not None and stamps.ack_ns is None
            # The ambiguity is real: the hung order was placed, and a resend is refused.
            with pytest.raises(ExchangeError) as again:
                await client.place_order(order_body(yes_spec()), OrderStamps(), dry_run=False)
    assert again.value.status == 409
    assert CLIENT_ORDER_ID in fake_exchange.orders
    assert len(order_requests(fake_exchange)) == 2


async def test_stamps_are_ordered_for_a_real_order(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """sign_start <= sign_end <= sent <= ack, all taken."""
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            await client.place_order(order_body(yes_spec()), stamps, dry_run=False)
    assert stamps.sign_start_ns is not None and stamps.sign_end_ns is not None
    assert stamps.sent_ns is not None and stamps.ack_ns is not None
    assert stamps.sign_start_ns <= stamps.sign_end_ns <= stamps.sent_ns <= stamps.ack_ns


async def test_stamps_are_reset_on_every_attempt(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """After two answered failures and a final drop, no ack from an earlier attempt survives."""
    fake_exchange.inject(Fault("status", status=429), Fault("status", status=503), Fault("drop"))
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with open_exchange(
            fake_endpoint(fake_exchange, fake_credentials), retry=FAST_RETRY
        ) as client:
            with pytest.raises(ExchangeAmbiguous, match="connection lost"):
                await client.place_order(order_body(yes_spec()), stamps, dry_run=False)
    assert stamps.attempts == 3
    assert stamps.sent_ns is not None
    assert stamps.ack_ns is None


async def test_a_shadow_fire_signs_and_stamps_but_sends_nothing(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """dry_run returns {} after the sent stamp: no request reaches the fake, no token is taken."""
    bucket = TokenBucket(refill_per_s=0.001)  # no refill to speak of during the test
    stamps = OrderStamps()
    endpoint = fake_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(10):
        async with open_exchange(endpoint, limiter=bucket) as client:
            response = await client.place_order(order_body(yes_spec()), stamps, dry_run=True)
            assert response == {}
            assert order_requests(fake_exchange) == []
            assert bucket.available() == pytest.approx(100, abs=0.01)
            assert stamps.sign_start_ns is not None and stamps.sign_end_ns is not None
            assert stamps.sent_ns is not None and stamps.ack_ns is None
            assert stamps.sign_start_ns <= stamps.sign_end_ns <= stamps.sent_ns
            # The negative twin: a real fire takes ten tokens.
            await client.place_order(order_body(yes_spec()), OrderStamps(), dry_run=False)
            assert bucket.available() == pytest.approx(90, abs=0.01)


async def test_the_rate_limit_wait_comes_before_signing(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """While an order waits for a token, nothing has been signed yet."""
    bucket = TokenBucket(capacity=10, refill_per_s=10)
    stamps = OrderStamps()
    with trio.fail_after(10):
        async with (
            open_exchange(fake_endpoint(fake_exchange, fake_credentials), limiter=bucket) as client,
            trio.open_nursery() as nursery,
        ):
            await bucket.acquire(10)
            nursery.start_soon(
                lambda: client.place_order(order_body(yes_spec()), stamps, dry_run=False)
            )
            await trio.testing.wait_all_tasks_blocked()
            assert stamps.attempts == 1
            assert stamps.sign_start_ns is None
    assert stamps.ack_ns is not None


async def test_several_orders_share_one_keep_alive_connection(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """One pre-warmed order connection carries every order and one httpx connection the balance
    requests: no handshake after start-up."""
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            for number in range(5):
                spec = yes_spec(client_order_id=f"{number:032x}")
                await client.place_order(order_body(spec), OrderStamps(), dry_run=False)
            await client.get_balance_cents()
            assert client.orders.opened == ORDER_CONNECTIONS
    assert fake_exchange.connections_opened == 1 + ORDER_CONNECTIONS
    assert len({r.connection for r in order_requests(fake_exchange)}) == 1
    balances = {r.connection for r in fake_exchange.received if r.path == BALANCE_PATH}
    assert len(balances) == 1 and not balances & {
        r.connection for r in order_requests(fake_exchange)
    }
    assert len(fake_exchange.received) == 7


async def test_balance_is_read_in_cents_and_follows_fills(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The balance endpoint gives integer cents; a fill of 3 at $0.42 plus fees debits it."""
    fake_exchange.balance_cents = 12_345
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            assert await client.get_balance_cents() == 12_345
            await client.place_order(order_body(yes_spec()), OrderStamps(), dry_run=False)
            fee_cents = 3 * math.ceil(7 * 0.42 * 0.58)
            assert await client.get_balance_cents() == 12_345 - 126 - fee_cents


async def test_positions_follow_the_cursor_and_omit_zeros(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Five positions over three pages come back as absolute contracts, the zero one left out."""
    fake_exchange.positions = {"KXA": 1.0, "KXB": -2.5, "KXC": 0.0, "KXD": 4.0, "KXE": 7.0}
    with trio.fail_after(10):
        async with open_exchange(fake_endpoint(fake_exchange, fake_credentials)) as client:
            positions = await client.get_positions()
    assert positions == {"KXA": 1.0, "KXB": 2.5, "KXD": 4.0, "KXE": 7.0}
    pages = [r for r in fake_exchange.received if r.path == POSITIONS_PATH]
    assert [page.query for page in pages] == ["", "cursor=2", "cursor=4"]
    assert all(page.verified for page in pages)


async def test_an_untrusted_certificate_fails_the_prewarm(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials, tmp_path: Path
) -> None:
    """TLS is verified: a CA that did not issue the fake's certificate is refused at start."""
    stranger = tmp_path / "other-ca.pem"
    stranger.write_bytes(trustme.CA().cert_pem.bytes())
    endpoint = replace(fake_endpoint(fake_exchange, fake_credentials), ca_file=stranger)
    with trio.fail_after(10), pytest.raises(ExchangeError, match="CERTIFICATE_VERIFY_FAILED"):
        async with open_exchange(endpoint):
            pass  # pragma: no cover
    assert fake_exchange.received == []


async def test_a_missing_ca_file_or_bad_base_url_is_a_clear_error(
    fake_credentials: FakeCredentials, tmp_path: Path
) -> None:
    """Configuration mistakes raise ValueError naming the problem, before any connection."""
    signer = KalshiSigner(fake_credentials.private_key_path)
    missing = ExchangeEndpoint("https://127.0.0.1:1", "k", signer, tmp_path / "nope.pem")
    with pytest.raises(ValueError, match="no such file"):
        async with open_exchange(missing):
            pass  # pragma: no cover
    slashed = ExchangeEndpoint("https://127.0.0.1:1/", "k", signer, fake_credentials.ca_file)
    with pytest.raises(ValueError, match="no path or slash"):
        async with open_exchange(slashed):
            pass  # pragma: no cover


def _imports(path: Path) -> set[str]:
    """Every module a source file imports, plus ``package.name`` for each ``from`` import."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_the_transport_imports_nothing_from_the_fire_path_or_telemetry() -> None:
    """The transport's modules never import telemetry, rows, the writer, the risk gate or fire."""
    forbidden = {"telemetry", "rows", "sqlite_writer", "risk", "fire", "dispatcher"}
    imported: set[str] = set()
    modules = (exchange_module, exchange_wire, token_bucket, order_connection, order_pool)
    for module in (*modules, order_template, presign, rest):
        imported |= _imports(Path(module.__file__ or ""))
    touched = {
        name
        for name in imported
        for module in forbidden
        if name in {f"executor.{module}", f".{module}"} or name.startswith(f"executor.{module}.")
    }
    assert touched == set()
    assert "executor.signer" in imported  # the walk does see the package's imports
    assert not any(name.startswith(".") for name in imported)  # no relative import slips by
