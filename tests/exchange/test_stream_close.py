"""The stream's connection closes cleanly when its owner is cancelled (the executor stopping):
the exchange's close reply is still read, so the close handshake completes instead of waiting out
``CLOSE_TIMEOUT_S`` half-closed (every stop of an executor with a stream paid it)."""

from __future__ import annotations

import ssl

import pytest
import trio
from trio_websocket import WebSocketConnection
from wsproto.connection import ConnectionState

from executor.exchange.stream.client import (
    StreamDown,
    StreamEndpoint,
    open_stream,
    stream_url_of,
)
from executor.fake.exchange import FakeCredentials, FakeExchange
from executor.signer import KalshiSigner

WAIT_S = 10.0
"""Hang guard for the handshake on a busy 2-core box (seconds), never a speed claim."""


def fake_stream_endpoint(exchange: FakeExchange, credentials: FakeCredentials) -> StreamEndpoint:
    """The fake's stream, signed with its throwaway key and trusting its CA."""
    signer = KalshiSigner(credentials.private_key_path, credentials.key_id)
    context = ssl.create_default_context(cafile=str(credentials.ca_file))
    return StreamEndpoint(
        stream_url_of(exchange.base_url), credentials.key_id, signer.sign, context
    )


async def test_a_cancelled_connection_still_completes_its_close_handshake(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """Cancelling the task that holds a connection ends it with the close handshake done (the
    WebSocket CLOSED, the exchange's reply read), not half-closed (LOCAL_CLOSING) until the
    close timeout gives up."""
    endpoint = fake_stream_endpoint(fake_exchange, fake_credentials)
    held: list[WebSocketConnection] = []
    opened = trio.Event()

    async def hold() -> None:
        async with open_stream(endpoint) as ws:
            held.append(ws)
            opened.set()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        with trio.fail_after(WAIT_S):
            await opened.wait()
        nursery.cancel_scope.cancel()
    (ws,) = held
    # trio-websocket shows the handshake's progress only through its wsproto connection.
    assert ws._wsproto.state is ConnectionState.CLOSED


async def test_a_refused_handshake_is_still_one_stream_down(
    fake_exchange: FakeExchange, fake_credentials: FakeCredentials
) -> None:
    """With the reader in its own nursery, a handshake the exchange refuses (503) still ends the
    attempt as one StreamDown naming the refusal, not as an exception group."""
    fake_exchange.stream.accepting = False
    endpoint = fake_stream_endpoint(fake_exchange, fake_credentials)
    with trio.fail_after(WAIT_S), pytest.raises(StreamDown, match="handshake refused"):
        async with open_stream(endpoint):
            raise AssertionError("a refused handshake opened a connection")
