"""The fake exchange's WebSocket stream: the signed handshake, the channels fed by the book, the
pings and the fault modes, every message validated against the published AsyncAPI file.

The client here is trio-websocket on its own (not the executor's stream client), so the fake is
checked independently of the code it serves.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    WebSocketConnection,
    wrap_client_stream,
)

from executor.clock import wall_ms
from executor.fake.exchange import STREAM_PATH, FakeCredentials, FakeExchange
from executor.fake.stream import HEARTBEAT
from executor.signer import KalshiSigner
from tests.support.asyncapi import (
    validate_command,
    validate_control_frame,
    validate_server_message,
)
from tests.support.orders import TICKER

WAIT_S = 10.0
"""Hang guard for one exchange of messages (seconds), never a speed claim."""


def signed_headers(credentials: FakeCredentials, path: str = STREAM_PATH) -> list[tuple[str, str]]:
    """The three Kalshi headers for ``GET path``, signed now."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)
    return list(signer.headers(str(wall_ms()), "GET", path).items())


@asynccontextmanager
async def session(
    exchange: FakeExchange,
    credentials: FakeCredentials,
    headers: list[tuple[str, str]] | None = None,
) -> AsyncIterator[WebSocketConnection]:
    """A WebSocket session on the fake, trusting its CA; a refused handshake raises
    ConnectionRejected. The TCP stream is opened and closed here: trio-websocket's own
    ``open_websocket_url`` leaves a refused handshake's socket unclosed."""
    context = ssl.create_default_context(cafile=str(credentials.ca_file))
    host, _, port = exchange.base_url.removeprefix("https://").partition(":")
    sent = headers if headers is not None else signed_headers(credentials)
    stream = await trio.open_ssl_over_tcp_stream(
        host, int(port), ssl_context=context, https_compatible=True
    )
    try:
        async with trio.open_nursery() as reader:
            with trio.fail_after(WAIT_S):
                ws = await wrap_client_stream(
                    reader,
                    stream,
                    f"{host}:{port}",
                    STREAM_PATH,
                    extra_headers=[(name.encode(), value.encode()) for name, value in sent],
                )
            yield ws
            await ws.aclose()
    except* ConnectionRejected as refused:
        raise refused.exceptions[0] from None
    finally:
        await trio.aclose_forcefully(stream)


async def receive(ws: WebSocketConnection) -> dict[str, Any]:
    """The next message, validated against the published schema."""
    with trio.fail_after(WAIT_S):
        text = await ws.get_message()
    validate_server_message(text)
    message: dict[str, Any] = orjson.loads(text)
    return message


async def subscribe(ws: WebSocketConnection, *channels: str) -> dict[str, int]:
    """Subscribe to ``channels``; their sids."""
    command = {"id": 1, "cmd": "subscribe", "params": {"channels": list(channels)}}
    validate_command(command)
    await ws.send_message(orjson.dumps(command).decode())
    sids = {}
    for _ in channels:
        reply = await receive(ws)
        assert reply["type"] == "subscribed" and reply["id"] == 1
        sids[reply["msg"]["channel"]] = reply["msg"]["sid"]
    return sids


def resting_order(exchange: FakeExchange, client_order_id: str = "r" * 32) -> None:
    """Place a three-contract good_till_canceled order that rests."""
    exchange.place_order(
        orjson.dumps(
            {
                "ticker": TICKER,
                "client_order_id": client_order_id,
                "side": "bid",
                "count": "3.00",
                "price": "0.4200",
                "time_in_force": "good_till_canceled",
                "self_trade_prevention_type": "taker_at_cross",
                "post_only": True,
                "exchange_index": 0,
            }
        )
    )


def validate_everything_sent(exchange: FakeExchange) -> None:
    """Every message the fake sent (all sessions) matches the published schemas."""
    for message in exchange.stream.sent:
        validate_server_message(message)


async def test_an_unsigned_or_badly_signed_handshake_is_refused_401(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Without the headers, or signed for another path, the upgrade is answered 401."""
    for headers in ([], signed_headers(fake_credentials, "/trade-api/v2/portfolio/balance")):
        with pytest.raises(ConnectionRejected) as refused:
            async with session(fake_exchange, fake_credentials, headers):
                pass
        assert refused.value.status_code == 401
    assert fake_exchange.stream.sessions_opened == 0


async def test_a_signed_handshake_opens_a_session(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The negative twin: signed for GET /trade-api/ws/v2, the session opens."""
    async with session(fake_exchange, fake_credentials) as ws:
        assert await subscribe(ws, "fill") == {"fill": 1}
    assert fake_exchange.stream.sessions_opened == 1


async def test_a_resting_order_filled_and_cancelled_reaches_the_subscribers(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Placed, partly filled as a maker, then cancelled: user_order, fill + user_order, then
    user_order canceled, each with its session's sid, every one published in shape."""
    async with session(fake_exchange, fake_credentials) as ws:
        sids = await subscribe(ws, "fill", "user_orders")
        resting_order(fake_exchange)
        placed = await receive(ws)
        assert (placed["type"], placed["sid"]) == ("user_order", sids["user_orders"])
        assert placed["msg"]["status"] == "resting"
        assert placed["msg"]["client_order_id"] == "r" * 32
        fake_exchange.fill_resting("r" * 32, "1")
        fill, update = await receive(ws), await receive(ws)
        assert (fill["type"], fill["sid"]) == ("fill", sids["fill"])
        assert fill["msg"]["is_taker"] is False and fill["msg"]["count_fp"] == "1.00"
        assert fill["msg"]["order_id"] == placed["msg"]["order_id"]
        assert fill["msg"]["post_position_fp"] == "1.00"
        assert update["msg"]["fill_count_fp"] == "1.00"
        assert update["msg"]["remaining_count_fp"] == "2.00"
        fake_exchange.cancel_resting("r" * 32)
        canceled = await receive(ws)
        assert canceled["msg"]["status"] == "canceled"
        assert canceled["msg"]["remaining_count_fp"] == "0.00"
    validate_everything_sent(fake_exchange)


async def test_an_order_filled_at_placement_is_a_taker_fill(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A fill_or_kill order that fills sends a taker fill with its fee, then user_order
    executed."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "fill", "user_orders")
        fake_exchange.place_order(
            orjson.dumps(
                {
                    "ticker": TICKER,
                    "client_order_id": "f" * 32,
                    "side": "bid",
                    "count": "3.00",
                    "price": "0.4200",
                    "time_in_force": "fill_or_kill",
                    "self_trade_prevention_type": "taker_at_cross",
                }
            )
        )
        fill, update = await receive(ws), await receive(ws)
    assert fill["msg"]["is_taker"] is True
    assert (fill["msg"]["count_fp"], fill["msg"]["fee_cost"]) == ("3.00", "0.0600")
    assert update["msg"]["status"] == "executed"


async def test_only_subscribed_channels_are_sent(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A session subscribed to user_orders alone gets no fill message."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "user_orders")
        resting_order(fake_exchange)
        fake_exchange.fill_resting("r" * 32)
        assert (await receive(ws))["msg"]["status"] == "resting"
        assert (await receive(ws))["msg"]["status"] == "executed"
    assert {message["type"] for message in fake_exchange.stream.sent} == {
        "subscribed",
        "user_order",
    }


async def test_unknown_channels_and_commands_are_published_errors(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """An unserved channel answers code 8, a second subscription code 6, an unknown command 5,
    a message that is not JSON code 1."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "fill")
        for command, code in (
            ({"id": 2, "cmd": "subscribe", "params": {"channels": ["ticker"]}}, 8),
            ({"id": 3, "cmd": "subscribe", "params": {"channels": ["fill"]}}, 6),
            ({"id": 4, "cmd": "list_everything", "params": {}}, 5),
        ):
            await ws.send_message(orjson.dumps(command).decode())
            reply = await receive(ws)
            assert (reply["type"], reply["msg"]["code"]) == ("error", code)
            assert reply["id"] == command["id"]
        await ws.send_message("{not json")
        assert (await receive(ws))["msg"]["code"] == 1


async def test_the_fake_pings_with_heartbeat_and_the_client_answers(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Pings carry the published body; the client's Pongs are counted."""
    validate_control_frame("outgoingPing", HEARTBEAT)
    fake_exchange.stream.ping_interval_s = 0.01
    async with session(fake_exchange, fake_credentials):
        with trio.fail_after(WAIT_S):
            while fake_exchange.stream.pongs_received < 2:
                await fake_exchange.stream.wait_changed()
    assert fake_exchange.stream.pings_sent >= 2


async def test_a_lost_message_is_never_sent_and_the_next_one_is(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """lose_next drops one user_order for every session; the following one arrives."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "user_orders")
        fake_exchange.stream.lose_next("user_orders")
        resting_order(fake_exchange)
        fake_exchange.cancel_resting("r" * 32)
        assert (await receive(ws))["msg"]["status"] == "canceled"
    (lost,) = fake_exchange.stream.lost
    assert lost["msg"]["status"] == "resting"


async def test_dropped_connections_end_the_session_without_a_close_frame(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """drop_connections cuts the connection: the client sees it closed abnormally (1006)."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "fill")
        fake_exchange.stream.drop_connections()
        with pytest.raises(ConnectionClosed) as closed, trio.fail_after(WAIT_S):
            await ws.get_message()
    assert closed.value.reason is not None and closed.value.reason.code == 1006


async def test_a_stream_that_is_not_accepting_answers_503(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """accepting False refuses a signed upgrade with 503 (the stream stays down)."""
    fake_exchange.stream.accepting = False
    with pytest.raises(ConnectionRejected) as refused:
        async with session(fake_exchange, fake_credentials):
            pass
    assert refused.value.status_code == 503


async def test_delayed_messages_are_held_then_sent_in_order(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """With a delay nothing is sent while the writer waits; with a short one every message
    arrives, in order."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "user_orders")
        fake_exchange.stream.delay_s = 3600.0
        resting_order(fake_exchange, "1" * 32)
        await trio.testing.wait_all_tasks_blocked()
        assert [m["type"] for m in fake_exchange.stream.sent] == ["subscribed"]
    fake_exchange.stream.delay_s = 0.01
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "user_orders")
        resting_order(fake_exchange, "2" * 32)
        fake_exchange.cancel_resting("2" * 32)
        statuses = [(await receive(ws))["msg"]["status"] for _ in range(2)]
    assert statuses == ["resting", "canceled"]


async def test_order_group_updates_go_out_with_a_sequence(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """The order-group seam publishes created and triggered events, seq rising, in shape."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "order_group_updates")
        fake_exchange.stream.publish_order_group("created", "og_1", "10.00")
        fake_exchange.stream.publish_order_group("triggered", "og_1")
        created, triggered = await receive(ws), await receive(ws)
    assert (created["msg"]["event_type"], created["msg"]["contracts_limit_fp"]) == (
        "created",
        "10.00",
    )
    assert triggered["msg"]["event_type"] == "triggered"
    assert "contracts_limit_fp" not in triggered["msg"]
    assert triggered["seq"] == created["seq"] + 1


def test_the_validator_refuses_what_the_published_api_does_not_allow() -> None:
    """The negative twin of every validation above: a fill with a hex order id (not a UUID), one
    without a required field, one with an undeclared field, and a Ping body other than
    ``heartbeat`` all fail."""
    good = {
        "type": "order_group_updates",
        "sid": 1,
        "seq": 1,
        "msg": {"event_type": "created", "order_group_id": "og", "ts_ms": 1},
    }
    validate_server_message(good)
    missing = {**good, "msg": {"event_type": "created", "order_group_id": "og"}}
    extra = {**good, "msg": {**good["msg"], "colour": "red"}}
    bad_event = {**good, "msg": {**good["msg"], "event_type": "exploded"}}
    for message in (missing, extra, bad_event):
        with pytest.raises(pytest.fail.Exception):
            validate_server_message(message)
    with pytest.raises(pytest.fail.Exception, match="order_id"):
        validate_server_message(
            {
                "type": "fill",
                "sid": 1,
                "msg": {
                    "trade_id": "d91bc706-ee49-470d-82d8-11418bda6fed",
                    "order_id": "a" * 32,
                    "market_ticker": "KXTEST",
                    "exchange_index": 0,
                    "is_taker": False,
                    "side": "yes",
                    "yes_price_dollars": "0.4200",
                    "count_fp": "1.00",
                    "fee_cost": "0.0000",
                    "action": "buy",
                    "outcome_side": "yes",
                    "book_side": "bid",
                    "ts": 1,
                    "ts_ms": 1000,
                    "post_position_fp": "1.00",
                    "purchased_side": "yes",
                },
            }
        )
    with pytest.raises(pytest.fail.Exception):
        validate_control_frame("outgoingPing", b"")


async def test_a_client_that_resets_its_connection_ends_the_session_quietly(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """A subscriber whose TCP connection is reset mid-session (SO_LINGER 0) ends its session as a
    client going away: no ``connection failed`` error with a traceback, the fake serving on."""
    context = ssl.create_default_context(cafile=str(fake_credentials.ca_file))
    host, _, port = fake_exchange.base_url.removeprefix("https://").partition(":")
    with capture_logs() as logs, trio.fail_after(WAIT_S):
        tcp = await trio.open_tcp_stream(host, int(port))
        stream = trio.SSLStream(tcp, context, server_hostname=host, https_compatible=True)
        async with trio.open_nursery() as reader:
            extra = [
                (name.encode(), value.encode()) for name, value in signed_headers(fake_credentials)
            ]
            ws = await wrap_client_stream(
                reader, stream, f"{host}:{port}", STREAM_PATH, extra_headers=extra
            )
            await subscribe(ws, "fill")
            tcp.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            tcp.socket.close()  # a reset, not a close frame nor a FIN
            reader.cancel_scope.cancel()
        while fake_exchange.stream.sessions:
            await fake_exchange.stream.wait_changed()
    failed = [entry for entry in logs if entry["event"] == "fake exchange: connection failed"]
    assert failed == []
    async with session(fake_exchange, fake_credentials) as again:
        assert (await subscribe(again, "fill")).keys() == {"fill"}


async def test_a_message_can_be_sent_twice_or_out_of_order(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """``duplicate_next`` sends the next user_order twice; ``swap_next`` sends the next one after
    the one that follows it (the negative twin: without either, one each, in order)."""
    async with session(fake_exchange, fake_credentials) as ws:
        await subscribe(ws, "user_orders")
        fake_exchange.stream.duplicate_next("user_orders")
        resting_order(fake_exchange, "d" * 32)
        first, again = await receive(ws), await receive(ws)
        assert first == again and first["msg"]["client_order_id"] == "d" * 32
        fake_exchange.stream.swap_next("user_orders")
        fake_exchange.fill_resting("d" * 32, "1")
        fake_exchange.fill_resting("d" * 32, "1")
        later, earlier = await receive(ws), await receive(ws)
        assert (later["msg"]["fill_count_fp"], earlier["msg"]["fill_count_fp"]) == ("2.00", "1.00")
        fake_exchange.fill_resting("d" * 32, "1")
        assert (await receive(ws))["msg"]["fill_count_fp"] == "3.00"
    validate_everything_sent(fake_exchange)
