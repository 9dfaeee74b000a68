"""The exchange's stream: one WebSocket connection to ``/trade-api/ws/v2``, kept up, in its task.

:func:`serve_stream` runs in the order path's pollers nursery beside the account poll, never on
the wake path: nothing the connection loop or a fire awaits is held here, and the stream's only
REST reads are the reconciler's lookups, over the httpx client (``get_json``), never the order
connections. Each connection:

1. TLS to the stream's host with the order path's verifying context, then the WebSocket handshake
   with the three signed headers (``GET /trade-api/ws/v2``, signed like any request) through
   trio-websocket (``wrap_client_stream`` over a stream this module opens and always closes: a
   refused handshake otherwise leaves the socket to the garbage collector);
2. ``subscribe`` to ``fill``, ``user_orders`` and ``order_group_updates``, and the ``subscribed``
   replies awaited (an ``order_group_updates`` event goes to the exchange's halts,
   ``executor.exchange.halts``, whenever it comes);
3. a reconciliation of every followed order through the lookups
   (:meth:`~executor.exchange.stream.orders.StreamedOrders.reconcile_followed`): fills and order
   updates carry no sequence numbers, so what the stream missed while it was down is found only
   this way; only then is the stream trusted (the account poll stops following resting orders);
4. messages applied as they come (``executor.exchange.stream.orders``), while a keep-alive task
   Pings every ``KEEPALIVE_INTERVAL_S`` (the exchange's own Pings every 10 s are answered by
   trio-websocket) and ends a connection whose Pong does not come within ``PONG_TIMEOUT_S``.

Any failure (refused, unreachable, closed, silent, a reconciliation that could not ask) ends the
connection: the stream is untrusted (a log line says the account poll follows resting orders
again), and the next attempt waits a bounded, jittered, doubling backoff
(``BACKOFF_FIRST_S`` .. ``BACKOFF_MAX_S``), reset once a connection has been trusted.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import structlog
import trio
from trio_websocket import (
    ConnectionClosed,
    HandshakeError,
    WebSocketConnection,
    wrap_client_stream,
)

from executor.clock import wall_ms
from executor.exchange.follow.reconcile import Reconciler
from executor.exchange.halts import ExchangeHalts
from executor.exchange.stream.messages import (
    STREAM_CHANNELS,
    STREAM_PATH,
    StreamGroupEvent,
    StreamMessage,
    StreamMessageError,
    StreamRefusal,
    Subscribed,
    parse_stream_message,
    subscribe_command,
)
from executor.exchange.stream.orders import StreamedOrders
from executor.exchange.stream.state import StreamState
from executor.logs import RateLimitedWarning
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP

log = structlog.get_logger()

CONNECT_TIMEOUT_S: Final = 10.0
"""Budget of TCP, TLS and the WebSocket handshake together (seconds): the REST read budget."""
SUBSCRIBE_TIMEOUT_S: Final = 10.0
"""Budget for the ``subscribed`` replies (seconds)."""
KEEPALIVE_INTERVAL_S: Final = 10.0
"""Seconds between our Pings: the exchange's own interval."""
PONG_TIMEOUT_S: Final = 10.0
"""A Pong later than this (seconds) ends the connection: one missed interval, then reconnect."""
CLOSE_TIMEOUT_S: Final = 2.0
"""How long a close handshake may take (seconds), shielded, before the socket is just closed."""
BACKOFF_FIRST_S: Final = 0.5
"""First wait before reconnecting (seconds); doubled per failure in a row."""
BACKOFF_MAX_S: Final = 30.0
"""Longest wait between attempts (seconds): the account poll's interval, which covers the book
while the stream is down."""
MESSAGE_QUEUE: Final = 64
"""Messages trio-websocket reads ahead of this task (its queue; beyond it the socket is left
unread, so the exchange's buffer, not this process's memory, holds a burst)."""
MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""Largest message accepted (bytes): an order update is under 1 KiB."""

_malformed: Final = RateLimitedWarning("stream message not understood: skipped")


class StreamDown(Exception):
    """A connection ended for a reason this module found (the text says which)."""


@dataclass(frozen=True, slots=True)
class StreamEndpoint:
    """Where the stream is and how its handshake is signed.

    Attributes:
        url: ``wss://host[:port]/trade-api/ws/v2``.
        key_id: the API key id.
        sign: ``(timestamp, method, path) -> signature`` (the endpoint's signer).
        context: the verifying TLS context (the order path's CA file).
    """

    url: str
    key_id: str
    sign: Callable[[str, str, str], str]
    context: ssl.SSLContext


def stream_url_of(base_url: str) -> str:
    """The stream URL on the REST base URL's host and port (the fake serves both on one)."""
    return "wss://" + urlsplit(base_url).netloc + STREAM_PATH


def handshake_headers(endpoint: StreamEndpoint) -> list[tuple[bytes, bytes]]:
    """The three Kalshi headers for ``GET /trade-api/ws/v2``, signed now."""
    timestamp = str(wall_ms())
    return [
        (HEADER_KEY.encode(), endpoint.key_id.encode()),
        (HEADER_TIMESTAMP.encode(), timestamp.encode()),
        (HEADER_SIGNATURE.encode(), endpoint.sign(timestamp, "GET", STREAM_PATH).encode()),
    ]


async def _reader_home(
    task_status: trio.TaskStatus[tuple[trio.Nursery, trio.CancelScope]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A nursery for trio-websocket's reader task, and the scope that ends it.

    The scope is shielded so that the reader outlives its owner's cancellation until
    :func:`open_stream` has closed the connection: the close handshake needs the reader to read
    the exchange's reply, and a cancelled reader left every stop waiting ``CLOSE_TIMEOUT_S``.
    :func:`open_stream` always cancels the scope (in ``finally``), so the shield never outlives
    the connection.
    """
    with trio.CancelScope(shield=True) as scope:
        async with trio.open_nursery() as home:
            task_status.started((home, scope))
            await trio.sleep_forever()


@asynccontextmanager
async def open_stream(endpoint: StreamEndpoint) -> AsyncIterator[WebSocketConnection]:
    """One WebSocket connection to the stream, closed (and its socket) on exit.

    Raises:
        StreamDown: TCP, TLS or the handshake failed or was refused, within
            ``CONNECT_TIMEOUT_S``.

    Cancellation: the close handshake is shielded for at most ``CLOSE_TIMEOUT_S``; the socket
    is closed whatever happened.
    """
    parts = urlsplit(endpoint.url)
    if parts.scheme != "wss" or parts.hostname is None:
        raise StreamDown(f"stream URL {endpoint.url!r} is not wss://host/path")
    port = parts.port or 443
    host_header = parts.hostname if port == 443 else f"{parts.hostname}:{port}"
    try:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            stream = await trio.open_ssl_over_tcp_stream(
                parts.hostname, port, ssl_context=endpoint.context, https_compatible=True
            )
    except (OSError, trio.BrokenResourceError, trio.TooSlowError) as error:
        raise StreamDown(f"cannot connect: {error!r}") from None
    try:
        async with trio.open_nursery() as nursery:
            reader, reader_scope = await nursery.start(_reader_home)
            try:
                try:
                    with trio.fail_after(CONNECT_TIMEOUT_S):
                        ws = await wrap_client_stream(
                            reader,
                            stream,
                            host_header,
                            parts.path or STREAM_PATH,
                            extra_headers=handshake_headers(endpoint),
                            message_queue_size=MESSAGE_QUEUE,
                            max_message_size=MAX_MESSAGE_BYTES,
                        )
                except trio.TooSlowError:
                    raise StreamDown(f"no handshake within {CONNECT_TIMEOUT_S:g} s") from None
                try:
                    yield ws
                finally:
                    with trio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
                        await ws.aclose()
            finally:
                reader_scope.cancel()
    except* HandshakeError as refused:
        raise StreamDown(f"handshake refused: {refused.exceptions[0]!r}") from None
    except* (trio.BrokenResourceError, OSError) as broken:
        raise StreamDown(f"connection broken: {broken.exceptions[0]!r}") from None
    finally:
        await trio.aclose_forcefully(stream)


async def _apply(
    message: StreamMessage, orders: StreamedOrders, halts: ExchangeHalts | None
) -> None:
    """One message to whoever it concerns: the group's events to the halts, the rest to the
    orders."""
    if isinstance(message, StreamGroupEvent):
        if halts is not None:
            halts.hear_group_event(message.event_type, message.order_group_id)
        return
    await orders.apply(message)


async def subscribe(
    ws: WebSocketConnection, orders: StreamedOrders, halts: ExchangeHalts | None = None
) -> None:
    """Subscribe to the channels and wait for every ``subscribed`` reply (a message that comes
    first is applied as any other).

    Raises:
        StreamDown: an ``error`` reply, or no replies within ``SUBSCRIBE_TIMEOUT_S``.
    """
    await ws.send_message(subscribe_command(1))
    waiting = set(STREAM_CHANNELS)
    with trio.move_on_after(SUBSCRIBE_TIMEOUT_S) as timer:
        while waiting:
            message = parse_stream_message(await ws.get_message())
            if isinstance(message, Subscribed):
                waiting.discard(message.channel)
            elif isinstance(message, StreamRefusal):
                raise StreamDown(f"subscribe refused: {message.code} {message.text}")
            else:
                await _apply(message, orders, halts)
    if timer.cancelled_caught:
        raise StreamDown(f"no subscribed reply within {SUBSCRIBE_TIMEOUT_S:g} s")


async def _keep_alive(ws: WebSocketConnection, orders: StreamedOrders) -> None:
    while True:
        await trio.sleep(KEEPALIVE_INTERVAL_S)
        with trio.move_on_after(PONG_TIMEOUT_S) as timer:
            await ws.ping()
        if timer.cancelled_caught:
            raise StreamDown(f"no Pong within {PONG_TIMEOUT_S:g} s")
        await orders.catch_up()


async def _read(
    ws: WebSocketConnection, orders: StreamedOrders, halts: ExchangeHalts | None
) -> None:
    while True:
        text = await ws.get_message()
        try:
            message = parse_stream_message(text)
        except StreamMessageError as error:
            orders.malformed_messages += 1
            _malformed.warning(error=str(error))
            continue
        await _apply(message, orders, halts)
        await orders.catch_up()


async def _connection(
    endpoint: StreamEndpoint,
    orders: StreamedOrders,
    state: StreamState,
    halts: ExchangeHalts | None,
) -> None:
    """One connection, from the handshake to its end (which always raises)."""
    async with open_stream(endpoint) as ws:
        await subscribe(ws, orders, halts)
        state.note(connected=0, connects=1)
        if not await orders.reconcile_followed():
            raise StreamDown("the reconciliation could not ask the exchange")
        state.note(connected=1)
        log.info(
            "exchange stream up: fills and order updates as they happen",
            followed=len(orders.reconciler.followed),
            reconnects=state.reconnects,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_alive, ws, orders)
            await _read(ws, orders, halts)


async def serve_stream(
    endpoint: StreamEndpoint,
    orders: StreamedOrders,
    state: StreamState,
    *,
    halts: ExchangeHalts | None = None,
    jitter: Callable[[], float] = random.random,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Keep the stream connected until cancelled (reports started at once: the executor serves
    with or without it, the account poll covering the book meanwhile); ``halts`` hears the
    order groups' events.

    Cancellation: the connection is closed (shielded, bounded); nothing else is held.
    """
    task_status.started()
    failures_in_a_row = 0
    while True:
        try:
            await _connection(endpoint, orders, state, halts)
        except Exception as error:  # a bug here must not end the stream for good
            routine = routine_end(error)
            reason = repr(error) if routine is None else routine
            if routine is None:
                log.exception("exchange stream failed")
        else:
            reason = "closed"
        trusted = orders.trusted
        orders.untrust()
        state.note(connected=0, failures=1)
        # A connection that was trusted counts as a success: this failure is the first again.
        failures_in_a_row = 1 if trusted else failures_in_a_row + 1
        delay_s = reconnect_delay_s(failures_in_a_row, jitter())
        log.warning(
            "exchange stream down: the account poll follows resting orders until it is back",
            reason=reason,
            retry_in_s=round(delay_s, 3),
        )
        await trio.sleep(delay_s)


ROUTINE_ENDS: Final = (StreamDown, ConnectionClosed, HandshakeError, StreamMessageError)
"""How a connection ends in the ordinary run of things (one reconnect line, no traceback)."""


def routine_end(error: Exception) -> str | None:
    """Why a connection ended, when it ended the ordinary way: one of :data:`ROUTINE_ENDS`, or a
    group of nothing else (a failure inside the connection's nurseries leaves them as an
    ``ExceptionGroup``); None for anything else (a bug, logged with its traceback)."""
    if isinstance(error, ROUTINE_ENDS):
        return str(error) or repr(error)
    if isinstance(error, BaseExceptionGroup):
        routine, rest = error.split(ROUTINE_ENDS)
        if rest is None and routine is not None:
            first: BaseException = routine
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            return str(first) or repr(first)
    return None


def reconnect_delay_s(failures_in_a_row: int, jitter: float) -> float:
    """The wait before the next attempt after ``failures_in_a_row`` failures (at least 1).

    ``BACKOFF_FIRST_S`` after the first, doubled per failure after it, capped at
    ``BACKOFF_MAX_S``; then scaled by ``0.5 + jitter / 2`` (``jitter`` in [0, 1)), so the wait is
    between half of that and all of it, and executors cut off together do not return together.
    """
    nominal_s = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2.0 ** (max(failures_in_a_row, 1) - 1))
    return nominal_s * (0.5 + jitter / 2)


def poll_unless_streaming(
    orders: StreamedOrders | None, reconciler: Reconciler
) -> Callable[[], Awaitable[None]]:
    """The account poll's follow-up of open orders: while the stream is trusted, only those of
    unknown outcome (an order the exchange never had sends no stream message)."""

    async def follow_resting() -> None:
        await reconciler.poll_resting(unknown_only=orders is not None and orders.trusted)

    return follow_resting


__all__ = [
    "BACKOFF_FIRST_S",
    "BACKOFF_MAX_S",
    "KEEPALIVE_INTERVAL_S",
    "PONG_TIMEOUT_S",
    "StreamDown",
    "StreamEndpoint",
    "handshake_headers",
    "open_stream",
    "poll_unless_streaming",
    "reconnect_delay_s",
    "routine_end",
    "serve_stream",
    "stream_url_of",
    "subscribe",
]
