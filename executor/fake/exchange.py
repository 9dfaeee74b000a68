"""A local Kalshi exchange for tests, the benchmark and people without an account (DISPATCH §9).

A real HTTPS server on Trio: a per-run CA and a certificate for 127.0.0.1/localhost (trustme),
``trio.SSLStream`` over TCP, HTTP/1.1 keep-alive through h11's state machine (nothing parsed by
hand). Every request's RSA-PSS signature is checked with the public key only, independently of
``executor.signer``, and its timestamp must be fresh; a failure answers 401.

It speaks the endpoints the executor uses (orders, balance, positions, the orders list, one order,
the user data timestamp), keeps an account that fills debit, lists orders a settable lag late,
records every request it receives, and answers injected faults one per order request.
``GET /trade-api/ws/v2``, signed like the rest, upgrades to the WebSocket stream of fills and
order updates (``executor.fake.stream``), fed by every change to the account's book.

Run it from a shell::

    python -m executor.fake --port 8443 [--dir D] [--balance-cents N] [--fill-rule kill]
        [--fault hang-after-place ...] [--listing-lag-s 7.5]

It prints one JSON line (base_url, stream_url, key_id, private_key_path, ca_file) once serving
and runs until SIGINT or SIGTERM.
"""

from __future__ import annotations

import base64
import binascii
import http
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import h11
import structlog
import trio
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from executor.clock import wall_ms
from executor.fake.book.account import (
    BALANCE_PATH,
    DEFAULT_BALANCE_CENTS,
    ORDER_PATH,
    POSITIONS_PATH,
    TOO_MANY_REQUESTS_BODY,
    BookEvent,
    FakeAccount,
    GroupEvent,
    always_fill,
    error_body,
    never_fill,
)
from executor.fake.credentials import FakeCredentials
from executor.fake.stream import STREAM_PATH, StreamHub

__all__ = [
    "BALANCE_PATH",
    "DEFAULT_BALANCE_CENTS",
    "ORDER_PATH",
    "POSITIONS_PATH",
    "STREAM_PATH",
    "FakeCredentials",
    "FakeExchange",
    "Fault",
    "ReceivedRequest",
    "always_fill",
    "never_fill",
    "serve_fake_exchange",
]

DEFAULT_FRESHNESS_S: Final = 5.0
"""A signed timestamp further than this from now (seconds, either way) is stale: 401."""
RECEIVE_BYTES: Final = 64 * 1024
"""Read size per ``receive_some``: an order request is a few hundred bytes."""
MAX_BODY_BYTES: Final = 64 * 1024
"""Largest request body read (beyond it the connection is closed): an order is ~250 bytes."""

log = structlog.get_logger()

# The verifier's parameters, spelled out here so a wrong constant in the signer cannot hide.
_VERIFY_PADDING: Final = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)

FaultKind = Literal["latency", "status", "drop", "hang", "duplicate", "close"]


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, consumed by the next order request.

    Kinds: ``latency`` (wait ``seconds``, then answer normally); ``status`` (answer ``status`` with
    a published ``ErrorResponse`` body, ``{"code", "message"}``; a 429 without a ``code`` or
    ``message`` answers the published example ``{"error": "too many requests"}``); ``drop``
    (close the connection unanswered);
    ``hang`` (never answer; the connection closes when the client gives up); ``duplicate`` (the
    request arrives twice, as through a network that repeats it: the first places the order, the
    client hears the second's answer, a 409 for the ``client_order_id`` already used). ``place``
    makes a ``drop``, ``hang`` or ``status`` fault place the order first (the ambiguous outcomes:
    a timeout, a lost connection, a 5xx or a 2xx error body from an exchange that took it).
    """

    kind: FaultKind
    seconds: float = 0.0
    status: int = 0
    code: str = ""
    message: str = ""
    place: bool = False


@dataclass
class ReceivedRequest:
    """What the fake received, as it arrived, and how it answered (``status`` None: no answer)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    connection: int
    status: int | None = None
    auth_error: str | None = None
    fault: FaultKind | None = None


class FakeExchange(FakeAccount):
    """The account served over HTTPS; made and served by :func:`serve_fake_exchange`.

    Attributes (besides the account's ``balance_cents``, ``positions``, ``orders``, ``fill_rule``):
        base_url: ``https://host:port``.
        received: every request, in arrival order.
        freshness_s: how far a signed timestamp may be from now.
        connections_opened: TLS connections that completed a handshake.
        connections_closed: connections the fake has finished with (closed its end).
        stream: the WebSocket stream's sessions and fault modes (``executor.fake.stream``),
            told of every book change.
    """

    def __init__(
        self,
        public_key: rsa.RSAPublicKey,
        key_id: str,
        base_url: str,
        *,
        balance_cents: int = DEFAULT_BALANCE_CENTS,
        fill_rule: Callable[[dict[str, Any]], bool] = always_fill,
        freshness_s: float = DEFAULT_FRESHNESS_S,
        listing_lag_s: float = 0.0,
    ) -> None:
        super().__init__(
            balance_cents=balance_cents, fill_rule=fill_rule, listing_lag_s=listing_lag_s
        )
        self._public_key = public_key
        self.key_id = key_id
        self.base_url = base_url
        self.received: list[ReceivedRequest] = []
        self.freshness_s = freshness_s
        self.connections_opened = 0
        self.connections_closed = 0
        self._faults: deque[Fault] = deque()
        self._connection_ids = itertools.count(1)
        self.stream = StreamHub()
        self.watchers.append(self._to_stream)
        self.group_watchers.append(self._group_to_stream)

    def _to_stream(self, event: BookEvent) -> None:
        self.stream.announce(event, self.positions.get(event.order.ticker, 0.0))

    def _group_to_stream(self, event: GroupEvent) -> None:
        self.stream.publish_order_group(event.kind, event.order_group_id, event.contracts_limit_fp)

    def inject(self, *faults: Fault) -> None:
        """Queue ``faults``; each incoming order request consumes the next one, in order."""
        self._faults.extend(faults)

    def authenticate(
        self, method: str, path: str, headers: dict[str, str]
    ) -> tuple[bool, str | None]:
        """(signature verified, why the request is refused or None) for one request."""
        key_id = headers.get("kalshi-access-key", "")
        timestamp = headers.get("kalshi-access-timestamp", "")
        signature_b64 = headers.get("kalshi-access-signature", "")
        if not (key_id and timestamp and signature_b64):
            return False, "missing KALSHI-ACCESS-* authentication headers"
        if key_id != self.key_id:
            return False, f"unknown API key {key_id!r}"
        try:
            signature = base64.b64decode(signature_b64, validate=True)
            stamped_ms = int(timestamp)
        except (binascii.Error, ValueError):
            return False, "malformed timestamp or signature"
        message = (timestamp + method + path).encode()
        try:
            self._public_key.verify(signature, message, _VERIFY_PADDING, hashes.SHA256())
        except InvalidSignature:
            return False, "signature does not verify"
        if abs(wall_ms() - stamped_ms) > self.freshness_s * 1000:
            return True, f"stale timestamp (more than {self.freshness_s:g} s from now)"
        return True, None

    async def serve_connection(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        """Serve HTTP/1.1 requests on one TLS connection until it closes (never raises)."""
        connection = next(self._connection_ids)
        try:
            await stream.do_handshake()
            self.connections_opened += 1
            await self._serve_requests(stream, connection)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass  # the client went away or spoke nonsense: nothing to answer
        except Exception:
            # A bug here must cost one connection, not the whole fake (serve_listeners would
            # tear every connection down with it).
            log.exception("fake exchange: connection failed", connection=connection)
        finally:
            await trio.aclose_forcefully(stream)
            self.connections_closed += 1

    async def _serve_requests(
        self, stream: trio.SSLStream[trio.SocketStream], connection: int
    ) -> None:
        protocol = h11.Connection(h11.SERVER)
        while (request := await _read_request(stream, protocol)) is not None:
            record = self._record(*request, connection)
            if record.path == STREAM_PATH and record.method == "GET":
                await self._stream_session(record, stream, protocol)
                return
            fault = self._faults.popleft() if self._faults and record.path == ORDER_PATH else None
            record.fault = fault.kind if fault else None
            answer = await self._answer(record, fault, stream)
            if answer is None:
                return  # dropped or hung: the connection ends unanswered
            record.status, payload = answer
            await _send_response(stream, protocol, record.status, payload)
            if protocol.our_state is h11.MUST_CLOSE or record.fault == "close":
                return
            protocol.start_next_cycle()

    async def _stream_session(
        self,
        record: ReceivedRequest,
        stream: trio.SSLStream[trio.SocketStream],
        protocol: h11.Connection,
    ) -> None:
        """The WebSocket upgrade: 401 unless signed, 503 while the stream refuses, else a
        session (the connection is the stream's until it ends)."""
        if record.auth_error is not None or not self.stream.accepting:
            status = 401 if record.auth_error is not None else 503
            record.status = status
            message = record.auth_error or "the stream is not accepting connections"
            code = "unauthorized" if status == 401 else "service_unavailable"
            await _send_response(stream, protocol, status, error_body(code, message))
            return
        record.status = 101
        headers = [(name.encode(), value.encode()) for name, value in record.headers.items()]
        await self.stream.serve(stream, headers, record.path, protocol.trailing_data[0])

    def _record(self, head: h11.Request, body: bytes, connection: int) -> ReceivedRequest:
        path, _, query = head.target.decode("latin-1").partition("?")
        method = head.method.decode("latin-1")
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in head.headers}
        verified, auth_error = self.authenticate(method, path, headers)
        record = ReceivedRequest(
            method, path, query, headers, body, verified, connection, auth_error=auth_error
        )
        self.received.append(record)
        return record

    async def _answer(
        self,
        record: ReceivedRequest,
        fault: Fault | None,
        stream: trio.SSLStream[trio.SocketStream],
    ) -> tuple[int, bytes] | None:
        """(status, body) for one request, after its fault; None when it must go unanswered.

        Faults come first (they stand for the network and the exchange's front end), then the
        signature check, then the account.
        """
        request = (record.method, record.path, record.query, record.body)
        kind = fault.kind if fault else None
        if fault is not None and kind in {"drop", "hang"}:
            if fault.place and record.auth_error is None:
                self.answer(*request)
            if kind == "hang":
                while await stream.receive_some(RECEIVE_BYTES):
                    pass  # answer nothing; return once the client closes
            return None
        if fault is not None and kind == "latency":
            await trio.sleep(fault.seconds)
        if fault is not None and kind == "status":
            if fault.place and record.auth_error is None:
                self.answer(*request)
            if fault.status == 429 and not (fault.code or fault.message):
                return 429, TOO_MANY_REQUESTS_BODY
            code = fault.code or _reason(fault.status).lower().replace(" ", "_")
            return fault.status, error_body(code, fault.message or "injected fault")
        if record.auth_error is not None:
            return 401, error_body("unauthorized", record.auth_error)
        if kind == "duplicate":
            self.answer(*request)
        return self.answer(*request)


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


async def _read_request(
    stream: trio.SSLStream[trio.SocketStream], protocol: h11.Connection
) -> tuple[h11.Request, bytes] | None:
    """The next request and its whole body, or None when the client closed between requests."""
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = protocol.next_event()
        if event is h11.NEED_DATA:
            protocol.receive_data(bytes(await stream.receive_some(RECEIVE_BYTES)))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None  # h11 never ends a message it did not start
            return head, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send_response(
    stream: trio.SSLStream[trio.SocketStream], protocol: h11.Connection, status: int, payload: bytes
) -> None:
    head = h11.Response(
        status_code=status,
        reason=_reason(status).encode(),
        headers=[("content-type", "application/json"), ("content-length", str(len(payload)))],
    )
    data = protocol.send(head) or b""
    data += protocol.send(h11.Data(data=payload)) or b""
    data += protocol.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)


async def serve_fake_exchange(
    credentials: FakeCredentials,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    balance_cents: int = DEFAULT_BALANCE_CENTS,
    fill_rule: Callable[[dict[str, Any]], bool] = always_fill,
    freshness_s: float = DEFAULT_FRESHNESS_S,
    listing_lag_s: float = 0.0,
    task_status: trio.TaskStatus[FakeExchange] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the fake on ``host:port`` (0 = any free port) until cancelled.

    ``listing_lag_s``: how late the orders endpoints list what happens (``FakeAccount``).

    ``task_status.started`` receives the :class:`FakeExchange` once the port is listening.
    """
    context = await trio.to_thread.run_sync(credentials.server_context)
    public_key = await trio.to_thread.run_sync(credentials.public_key)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound_port = listeners[0].socket.getsockname()[1]
    exchange = FakeExchange(
        public_key,
        credentials.key_id,
        f"https://{host}:{bound_port}",
        balance_cents=balance_cents,
        fill_rule=fill_rule,
        freshness_s=freshness_s,
        listing_lag_s=listing_lag_s,
    )
    tls_listeners = [trio.SSLListener(lst, context, https_compatible=True) for lst in listeners]
    task_status.started(exchange)
    await trio.serve_listeners(exchange.serve_connection, tls_listeners)
