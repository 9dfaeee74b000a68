"""The fake exchange's WebSocket stream: ``/trade-api/ws/v2`` on its TLS port, fed by the book.

The fake's HTTPS server (``executor.fake.exchange``) reads the upgrade request with h11 and checks
its signature like any other request (``GET /trade-api/ws/v2`` signed; 401 when it does not
verify); an authenticated upgrade is handed to :meth:`StreamHub.serve`, which completes the
WebSocket handshake with wsproto (``initiate_upgrade_connection``: the request is already parsed)
and runs one session: the client's commands (``subscribe``, ``unsubscribe``) answered, a Ping
with body ``heartbeat`` every ``ping_interval_s`` as Kalshi sends them, the client's Pings
answered, and the messages of the channels it subscribed to (``executor.fake.stream_messages``),
made from every :class:`~executor.fake.book.account.BookEvent` the account announces, so a fill or a
cancel made any way reaches the stream.

Fault modes, set on the hub by a test (or a person driving the fake): ``accepting = False``
answers upgrades 503 (the stream stays down); ``mute = True`` answers no command (a stalled
stream); :meth:`StreamHub.drop_connections` closes every
session's TCP connection without a close frame; ``delay_s`` holds each message that long before
sending it; :meth:`StreamHub.lose_next` loses the next message(s) of a channel for every session,
:meth:`StreamHub.duplicate_next` sends them twice, and :meth:`StreamHub.swap_next` holds the next
one back until the channel's following message has gone (out of order).
Every message sent is kept in ``sent`` (with its ``sid``) so a test can validate it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final

import orjson
import structlog
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Event,
    Ping,
    Pong,
    Request,
    TextMessage,
)

from executor.clock import wall_ms
from executor.fake.book.account import BookEvent
from executor.fake.stream_messages import (
    ALREADY_SUBSCRIBED,
    CHANNELS_REQUIRED,
    PARAMS_REQUIRED,
    SERVED_CHANNELS,
    UNABLE_TO_PROCESS,
    UNKNOWN_CHANNEL,
    UNKNOWN_COMMAND,
    UNKNOWN_SUBSCRIPTION,
    error_reply,
    fill_message,
    order_group_message,
    subscribed_reply,
    unsubscribed_reply,
    user_order_message,
)

STREAM_PATH: Final = "/trade-api/ws/v2"
"""Where the WebSocket API v2 is served (the published server's pathname)."""
PING_INTERVAL_S: Final = 10.0
"""Seconds between the fake's Pings (Kalshi's: "Ping frames every 10 seconds")."""
HEARTBEAT: Final = b"heartbeat"
"""The body of Kalshi's Pings."""
SESSION_QUEUE: Final = 10_000
"""Messages queued for one session before it is dropped as too slow to read (Kalshi's error 25,
"Subscription buffer overflow", ends a subscription likewise); a guess far above any test."""
RECEIVE_BYTES: Final = 64 * 1024
"""Read size per ``receive_some``: commands are a few hundred bytes."""

log = structlog.get_logger()

Headers = list[tuple[bytes, bytes]]


class StreamHub:
    """Every stream session of one fake exchange; see the module docstring for the fault modes.

    Attributes:
        sent: every message sent to any session, as sent (``sid`` included), in order.
        lost: every message lost by :meth:`lose_next`, as it would have been sent (no ``sid``).
        pings_sent: heartbeat Pings sent; pongs_received: Pongs the clients answered with.
        sessions_opened: WebSocket sessions accepted so far.
        accepting: False answers every upgrade 503.
        mute: True leaves every command unanswered (a stream stalled after its handshake).
        delay_s: how long each message waits before it is sent.
        ping_interval_s: seconds between heartbeat Pings.
    """

    def __init__(self, *, ping_interval_s: float = PING_INTERVAL_S) -> None:
        self.sent: list[dict[str, Any]] = []
        self.lost: list[dict[str, Any]] = []
        self.pings_sent = 0
        self.pongs_received = 0
        self.sessions_opened = 0
        self.accepting = True
        self.mute = False
        self.delay_s = 0.0
        self.ping_interval_s = ping_interval_s
        self._sessions: set[_Session] = set()
        self._to_lose: dict[str, int] = {}
        self._to_duplicate: dict[str, int] = {}
        self._to_swap: set[str] = set()
        self._held: dict[str, tuple[dict[str, Any], str | None]] = {}
        self._sids = itertools.count(1)
        self._group_seq = itertools.count(1)
        self._changed = trio.Event()

    @property
    def sessions(self) -> int:
        """Sessions open now."""
        return len(self._sessions)

    def subscribed(self, channel: str) -> int:
        """Open sessions subscribed to ``channel``."""
        return sum(channel in session.subscriptions for session in self._sessions)

    async def wait_changed(self) -> None:
        """Wait until a session opens, closes, subscribes, is sent a message or answers a Ping
        (tests wait on this instead of sleeping)."""
        await self._changed.wait()

    def lose_next(self, channel: str, count: int = 1) -> None:
        """Lose the next ``count`` messages of ``channel`` (for every session)."""
        self._to_lose[channel] = self._to_lose.get(channel, 0) + count

    def duplicate_next(self, channel: str, count: int = 1) -> None:
        """Send the next ``count`` messages of ``channel`` twice each (for every session)."""
        self._to_duplicate[channel] = self._to_duplicate.get(channel, 0) + count

    def swap_next(self, channel: str) -> None:
        """Hold the next message of ``channel`` back and send it just after the one that follows
        it (two messages out of order); a message still held is never sent (late past use)."""
        self._to_swap.add(channel)

    def drop_connections(self) -> None:
        """Close every session's connection now, without a close frame (a network cut)."""
        for session in list(self._sessions):
            session.abort()

    def publish(self, channel: str, message: dict[str, Any], ticker: str | None = None) -> None:
        """Send ``message`` (no ``sid`` yet) to every session subscribed to ``channel`` (and,
        for a session that named markets, to ``ticker``), unless it is to be lost."""
        if self._to_lose.get(channel, 0) > 0:
            self._to_lose[channel] -= 1
            self.lost.append(message)
            return
        if channel in self._to_swap:
            self._to_swap.discard(channel)
            self._held[channel] = (message, ticker)
            return
        copies = 1
        if self._to_duplicate.get(channel, 0) > 0:
            self._to_duplicate[channel] -= 1
            copies = 2
        held = self._held.pop(channel, None)
        for session in list(self._sessions):
            for _ in range(copies):
                session.offer(channel, message, ticker)
            if held is not None:
                session.offer(channel, held[0], held[1])

    def announce(self, event: BookEvent, position: float) -> None:
        """Publish what one book change says (``position``: the account's on the ticker after it):
        a ``fill`` when contracts filled (taker at placement, maker later), then the order's
        ``user_order``."""
        order = event.order
        if event.kind != "canceled" and event.contracts > 0:
            fill = fill_message(
                order,
                event.contracts,
                is_taker=event.kind == "placed",
                post_position=position,
                ts_ms=event.ts_ms,
            )
            self.publish("fill", fill, order.ticker)
        self.publish("user_orders", user_order_message(order), order.ticker)

    def publish_order_group(
        self, event_type: str, order_group_id: str, contracts_limit_fp: str | None = None
    ) -> None:
        """Announce an order group's event on ``order_group_updates`` (the seam the fake's
        order groups call)."""
        message = order_group_message(event_type, order_group_id, wall_ms(), contracts_limit_fp)
        message["seq"] = next(self._group_seq)
        self.publish("order_group_updates", message)

    def next_sid(self) -> int:
        """A fresh subscription id (unique across the hub's sessions)."""
        return next(self._sids)

    def notify(self) -> None:
        """Wake whoever waits in :meth:`wait_changed`."""
        self._changed.set()
        self._changed = trio.Event()

    async def serve(
        self, stream: trio.abc.Stream, headers: Headers, path: str, trailing: bytes
    ) -> None:
        """Complete the handshake of an authenticated upgrade request and run its session until
        either side closes or :meth:`drop_connections`. Never raises for the client's doing."""
        ws = WSConnection(ConnectionType.SERVER)
        ws.initiate_upgrade_connection(headers, path)
        request = next(iter(ws.events()), None)
        if not isinstance(request, Request):
            return  # wsproto refused the upgrade request (it was not a WebSocket one)
        await stream.send_all(ws.send(AcceptConnection()))
        session = _Session(self, stream, ws)
        self._sessions.add(session)
        self.sessions_opened += 1
        self.notify()
        try:
            if trailing:
                ws.receive_data(trailing)
            await session.run()
        finally:
            self._sessions.discard(session)
            self.notify()


class _Session:
    """One client's WebSocket session: a reader, a pinger and a writer over one stream."""

    def __init__(self, hub: StreamHub, stream: trio.abc.Stream, ws: WSConnection) -> None:
        self.hub = hub
        self.subscriptions: dict[str, tuple[int, frozenset[str] | None]] = {}
        self._stream = stream
        self._ws = ws
        self._lock = trio.Lock()
        self._outbox_send, self._outbox = trio.open_memory_channel[dict[str, Any]](SESSION_QUEUE)
        self._scope = trio.CancelScope()
        self._text: list[str] = []

    def offer(self, channel: str, message: dict[str, Any], ticker: str | None) -> None:
        """Queue ``message`` if this session subscribed to ``channel`` (and ``ticker``)."""
        subscription = self.subscriptions.get(channel)
        if subscription is None:
            return
        sid, tickers = subscription
        if tickers is not None and ticker is not None and ticker not in tickers:
            return
        if self._scope.cancel_called:
            return  # dropped, not yet gone
        try:
            self._outbox_send.send_nowait({"type": message["type"], "sid": sid, **message})
        except trio.WouldBlock:
            log.warning("fake stream: a session is too slow to read; dropped")
            self.abort()

    def abort(self) -> None:
        """End the session at once (the connection is closed by whoever accepted it)."""
        self._scope.cancel()

    async def run(self) -> None:
        with self._scope:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._ping)
                    nursery.start_soon(self._write)
                    await self._read()
                    nursery.cancel_scope.cancel()
            except* (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the client went away (the nursery wraps it, from whichever task saw it)

    async def _send(self, event: Event) -> None:
        async with self._lock:
            await self._stream.send_all(self._ws.send(event))

    async def _send_json(self, message: dict[str, Any]) -> None:
        await self._send(TextMessage(data=orjson.dumps(message).decode()))
        self.hub.sent.append(message)
        self.hub.notify()

    async def _ping(self) -> None:
        while True:
            await trio.sleep(self.hub.ping_interval_s)
            await self._send(Ping(payload=HEARTBEAT))
            self.hub.pings_sent += 1

    async def _write(self) -> None:
        async for message in self._outbox:
            if self.hub.delay_s > 0:
                await trio.sleep(self.hub.delay_s)
            await self._send_json(message)

    async def _read(self) -> None:
        """Answer the client until it closes (or its connection ends)."""
        while True:
            for event in self._ws.events():
                if isinstance(event, Ping):
                    await self._send(event.response())
                elif isinstance(event, Pong):
                    self.hub.pongs_received += 1
                    self.hub.notify()
                elif isinstance(event, TextMessage):
                    self._text.append(event.data)
                    if event.message_finished:
                        command, self._text = "".join(self._text), []
                        if not self.hub.mute:
                            await self._command(command)
                elif isinstance(event, CloseConnection):
                    await self._send(event.response())
                    return
            data = await self._stream.receive_some(RECEIVE_BYTES)
            if not data:
                return
            self._ws.receive_data(bytes(data))

    async def _command(self, text: str) -> None:
        try:
            command = orjson.loads(text)
        except orjson.JSONDecodeError:
            await self._send_json(error_reply(None, UNABLE_TO_PROCESS))
            return
        if not isinstance(command, dict):
            await self._send_json(error_reply(None, UNABLE_TO_PROCESS))
            return
        command_id = command.get("id")
        command_id = command_id if isinstance(command_id, int) and command_id > 0 else None
        handler = _COMMANDS.get(str(command.get("cmd")))
        if handler is None:
            await self._send_json(error_reply(command_id, UNKNOWN_COMMAND))
            return
        params = command.get("params")
        if not isinstance(params, dict):
            await self._send_json(error_reply(command_id, PARAMS_REQUIRED))
            return
        for reply in handler(self, command_id or 0, params):
            await self._send_json(reply)
        self.hub.notify()

    def _subscribe(self, command_id: int, params: dict[str, Any]) -> list[dict[str, Any]]:
        channels = params.get("channels")
        if not isinstance(channels, list) or not channels:
            return [error_reply(command_id or None, CHANNELS_REQUIRED)]
        tickers = params.get("market_tickers")
        if isinstance(params.get("market_ticker"), str):
            tickers = [params["market_ticker"]]
        wanted = frozenset(str(t) for t in tickers) if isinstance(tickers, list) else None
        replies = []
        for channel in channels:
            if channel not in SERVED_CHANNELS:
                replies.append(error_reply(command_id or None, UNKNOWN_CHANNEL))
            elif channel in self.subscriptions:
                replies.append(error_reply(command_id or None, ALREADY_SUBSCRIBED))
            else:
                sid = self.hub.next_sid()
                self.subscriptions[channel] = (sid, wanted)
                replies.append(subscribed_reply(command_id, channel, sid))
        return replies

    def _unsubscribe(self, command_id: int, params: dict[str, Any]) -> list[dict[str, Any]]:
        sids = params.get("sids")
        if not isinstance(sids, list) or not sids:
            return [error_reply(command_id or None, PARAMS_REQUIRED)]
        by_sid = {sid: channel for channel, (sid, _) in self.subscriptions.items()}
        replies = []
        for sid in sids:
            channel = by_sid.get(sid)
            if channel is None:
                replies.append(error_reply(command_id or None, UNKNOWN_SUBSCRIPTION))
            else:
                del self.subscriptions[channel]
                replies.append(unsubscribed_reply(command_id, sid, 1))
        return replies


_COMMANDS: Final[dict[str, Callable[[_Session, int, dict[str, Any]], list[dict[str, Any]]]]] = {
    "subscribe": _Session._subscribe,
    "unsubscribe": _Session._unsubscribe,
}
"""The commands the fake answers (the rest: "Unknown command")."""


__all__ = ["HEARTBEAT", "PING_INTERVAL_S", "STREAM_PATH", "StreamHub"]
