"""A local Kalshi exchange for tests, the benchmark and people without an account (DISPATCH §9).

A real HTTPS server on Trio: a per-run CA and a certificate for 127.0.0.1/localhost (trustme),
``trio.SSLStream`` over TCP, HTTP/1.1 keep-alive through h11's state machine (nothing parsed by
hand). Every request's RSA-PSS signature is checked with the public key only, independently of
``executor.signer``, and its timestamp must be fresh; a failure answers 401.

It speaks the three endpoints the executor uses (orders, balance, positions), keeps an account that
fills debit, records every request it receives, and answers injected faults one per order request.

Run it from a shell::

    python -m executor.fake_exchange --port 8443 [--dir D] [--balance-cents N] [--fill-rule kill]

It prints one JSON line (base_url, key_id, private_key_path, ca_file) once serving and runs until
SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import functools
import http
import itertools
import json
import math
import os
import signal
import ssl
import sys
import tempfile
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final, Literal

import h11
import orjson
import trio
import trustme
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from executor.clock import wall_ms

ORDER_PATH: Final = "/trade-api/v2/portfolio/events/orders"
BALANCE_PATH: Final = "/trade-api/v2/portfolio/balance"
POSITIONS_PATH: Final = "/trade-api/v2/portfolio/positions"
# Written out rather than imported from executor.exchange: the fake checks the transport, so it
# must not share its constants (a test asserts the two agree).

DEFAULT_BALANCE_CENTS: Final = 100_000
"""The account's starting balance in cents: $1,000 (DISPATCH.md §9)."""
DEFAULT_FRESHNESS_S: Final = 5.0
"""A signed timestamp further than this from now (seconds, either way) is stale: 401."""
POSITIONS_PAGE_SIZE: Final = 2
"""Positions per page: small, so every client that reads a few positions follows a cursor."""
RECEIVE_BYTES: Final = 64 * 1024
"""Read size per ``receive_some``: an order request is a few hundred bytes."""
MAX_BODY_BYTES: Final = 64 * 1024
"""Largest request body accepted (413 beyond): an order body is about 250 bytes."""
FEE_RATE: Final = Decimal("0.07")
"""Kalshi's taker fee coefficient: fee per contract = ceil_cent(0.07 * p * (1 - p))."""

# The verifier's parameters, spelled out here so a wrong constant in the signer cannot hide.
_VERIFY_PADDING: Final = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)

FaultKind = Literal["latency", "status", "drop", "hang", "duplicate"]


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, consumed by the next order request.

    Kinds: ``latency`` (wait ``seconds``, then answer normally); ``status`` (answer ``status`` with
    an ``{"error": {"code", "message"}}`` body); ``drop`` (close the connection unanswered);
    ``hang`` (never answer; the connection closes when the client gives up); ``duplicate`` (apply
    the order twice, as a network that repeats a request would: the second finds the
    ``client_order_id`` and answers the same order, the account moves once). ``place`` makes a
    ``drop`` or ``hang`` place the order first (the ambiguous outcome a timeout stands for).
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


@dataclass
class FakeCredentials:
    """A throwaway world for one run: an API key pair and a CA the executor must trust.

    Attributes:
        key_id: the API key id.
        private_key_path: RSA-2048 PKCS#8 PEM, mode 0600 (the executor signs with it).
        ca_file: the CA certificate (PEM) the executor verifies the fake's TLS with.
        server_pem: the fake's certificate chain and its key (PEM, mode 0600).
    """

    key_id: str
    private_key_path: Path
    ca_file: Path
    server_pem: Path | None = None

    @classmethod
    def generate(cls, directory: Path) -> FakeCredentials:
        """Write a fresh key, CA and server certificate into ``directory`` (blocking: ~0.1 s)."""
        directory.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private_key_path = directory / "api-key.pem"
        _write_private(
            private_key_path,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        authority = trustme.CA(organization_name="trio-executor fake exchange")
        ca_file = directory / "ca.pem"
        ca_file.write_bytes(authority.cert_pem.bytes())
        leaf = authority.issue_cert("127.0.0.1", "localhost")
        server_pem = directory / "server.pem"
        _write_private(server_pem, leaf.private_key_and_cert_chain_pem.bytes())
        return cls(str(uuid.uuid4()), private_key_path, ca_file, server_pem)

    def public_key(self) -> rsa.RSAPublicKey:
        """The public half of the API key: all the fake keeps to verify with (blocking)."""
        key = serialization.load_pem_private_key(self.private_key_path.read_bytes(), None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{self.private_key_path}: not an RSA key")
        return key.public_key()

    def server_context(self) -> ssl.SSLContext:
        """The fake's server TLS context (blocking: reads ``server_pem``)."""
        if self.server_pem is None:
            raise ValueError("these credentials have no server certificate; use generate()")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_pem)
        return context


def _write_private(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), 0o600)  # the mode above is masked by umask; this is not
        file.write(data)


def always_fill(order: dict[str, Any]) -> bool:
    """The default fill rule: every fill_or_kill and immediate_or_cancel order fills in full."""
    return True


def never_fill(order: dict[str, Any]) -> bool:
    """A fill rule that kills every fill_or_kill and immediate_or_cancel order."""
    return False


class _Reply(Exception):
    """Answer the current request with ``status`` and a Kalshi error body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class FakeExchange:
    """The fake's state and request handling; made and served by :func:`serve_fake_exchange`.

    Attributes:
        base_url: ``https://host:port``.
        received: every request, in arrival order.
        balance_cents: the account balance (settable), debited by fills and their fees.
        positions: signed contracts per ticker (YES positive), built from fills (settable).
        orders: the response of every placed order, by ``client_order_id``.
        fill_rule: order JSON -> fill (True) or kill (False) for fill_or_kill / IOC orders.
        freshness_s: how far a signed timestamp may be from now.
        connections_opened: TLS connections that completed a handshake.
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
    ) -> None:
        self._public_key = public_key
        self.key_id = key_id
        self.base_url = base_url
        self.received: list[ReceivedRequest] = []
        self.balance_cents = balance_cents
        self.positions: dict[str, float] = {}
        self.orders: dict[str, dict[str, Any]] = {}
        self.fill_rule = fill_rule
        self.freshness_s = freshness_s
        self.connections_opened = 0
        self._faults: deque[Fault] = deque()
        self._connection_ids = itertools.count(1)

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
        finally:
            await trio.aclose_forcefully(stream)

    async def _serve_requests(
        self, stream: trio.SSLStream[trio.SocketStream], connection: int
    ) -> None:
        protocol = h11.Connection(h11.SERVER)
        while True:
            request = await _read_request(stream, protocol)
            if request is None:
                return
            head, body = request
            target = head.target.decode("ascii", errors="replace")
            path, _, query = target.partition("?")
            method = head.method.decode("ascii", errors="replace")
            headers = {name.decode().lower(): value.decode() for name, value in head.headers}
            verified, auth_error = self.authenticate(method, path, headers)
            record = ReceivedRequest(
                method, path, query, headers, body, verified, connection, auth_error=auth_error
            )
            self.received.append(record)
            fault = self._faults.popleft() if self._faults and path == ORDER_PATH else None
            record.fault = fault.kind if fault else None
            if fault is not None and fault.kind in {"drop", "hang"}:
                if fault.place and auth_error is None:
                    self._dispatch(method, path, query, body)
                if fault.kind == "hang":
                    while await stream.receive_some(RECEIVE_BYTES):
                        pass  # answer nothing; return once the client closes
                return
            if fault is not None and fault.kind == "latency":
                await trio.sleep(fault.seconds)
            if fault is not None and fault.kind == "status":
                reason = http.HTTPStatus(fault.status).phrase
                status, payload = (
                    fault.status,
                    _error_body(
                        fault.code or reason.lower().replace(" ", "_"),
                        fault.message or "injected fault",
                    ),
                )
            elif auth_error is not None:
                status, payload = 401, _error_body("unauthorized", auth_error)
            else:
                if fault is not None and fault.kind == "duplicate":
                    self._dispatch(method, path, query, body)
                status, payload = self._dispatch(method, path, query, body)
            record.status = status
            await _send_response(stream, protocol, status, payload)
            if protocol.our_state is h11.MUST_CLOSE:
                return
            protocol.start_next_cycle()

    def _dispatch(self, method: str, path: str, query: str, body: bytes) -> tuple[int, bytes]:
        allowed = {ORDER_PATH: "POST", BALANCE_PATH: "GET", POSITIONS_PATH: "GET"}
        payload: dict[str, Any]
        try:
            if path not in allowed:
                raise _Reply(404, "not_found", f"no endpoint {path}")
            if method != allowed[path]:
                raise _Reply(405, "method_not_allowed", f"{path} takes {allowed[path]}")
            if path == ORDER_PATH:
                payload = self._place_order(body)
            elif path == BALANCE_PATH:
                payload = {"balance": self.balance_cents}
            else:
                payload = self._positions_page(query)
        except _Reply as reply:
            return reply.status, _error_body(reply.code, reply.message)
        return (201 if path == ORDER_PATH else 200), orjson.dumps(payload)

    def _place_order(self, body: bytes) -> dict[str, Any]:
        order = _parse_order(body)
        client_order_id = order["client_order_id"]
        if client_order_id in self.orders:
            return self.orders[client_order_id]  # idempotent: the same order again
        count, price = Decimal(order["count"]), Decimal(order["price"])
        count_text = f"{count:.2f}"
        response: dict[str, Any] = {
            "order_id": uuid.uuid4().hex,
            "client_order_id": client_order_id,
            "ticker": order["ticker"],
            "side": order["side"],
        }
        if order["time_in_force"] == "good_till_canceled" or not self.fill_rule(order):
            resting = order["time_in_force"] == "good_till_canceled"
            response.update(
                status="resting" if resting else "canceled",
                fill_count="0.00",
                remaining_count=count_text,
            )
        else:
            fee_dollars = Decimal(math.ceil(FEE_RATE * price * (1 - price) * 100)) / 100
            cost = count * (price if order["side"] == "bid" else 1 - price) + count * fee_dollars
            cost_cents = math.ceil(cost * 100)
            if cost_cents > self.balance_cents:
                raise _Reply(400, "insufficient_balance", f"order costs {cost_cents} cents")
            self.balance_cents -= cost_cents
            signed = float(count) if order["side"] == "bid" else -float(count)
            self.positions[order["ticker"]] = self.positions.get(order["ticker"], 0.0) + signed
            response.update(
                status="executed",
                fill_count=count_text,
                remaining_count="0.00",
                average_fill_price=order["price"],
                average_fee_paid=f"{fee_dollars:.4f}",
            )
        self.orders[client_order_id] = response
        return response

    def _positions_page(self, query: str) -> dict[str, Any]:
        cursor = dict(part.partition("=")[::2] for part in query.split("&") if part).get("cursor")
        start = 0
        if cursor:
            if not cursor.isdigit():
                raise _Reply(400, "invalid_cursor", f"bad cursor {cursor!r}")
            start = int(cursor)
        tickers = sorted(self.positions)
        page = tickers[start : start + POSITIONS_PAGE_SIZE]
        following = start + POSITIONS_PAGE_SIZE
        return {
            "market_positions": [
                {"ticker": ticker, "position_fp": f"{self.positions[ticker]:.2f}"}
                for ticker in page
            ],
            "cursor": str(following) if following < len(tickers) else "",
        }


def _parse_order(body: bytes) -> dict[str, Any]:
    try:
        order = orjson.loads(body)
        fields = {key: order[key] for key in ("ticker", "client_order_id", "side", "time_in_force")}
        count, price = Decimal(order["count"]), Decimal(order["price"])
    except (orjson.JSONDecodeError, KeyError, TypeError, InvalidOperation):
        raise _Reply(400, "invalid_parameters", "malformed order body") from None
    if not all(isinstance(value, str) for value in fields.values()) or fields["side"] not in {
        "bid",
        "ask",
    }:
        raise _Reply(400, "invalid_parameters", "malformed order fields")
    if count <= 0 or not 0 < price < 1:
        raise _Reply(400, "invalid_parameters", "count must be > 0 and 0 < price < 1")
    return dict(order)


def _error_body(code: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message}})


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
        reason=http.HTTPStatus(status).phrase.encode(),
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
    task_status: trio.TaskStatus[FakeExchange] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the fake on ``host:port`` (0 = any free port) until cancelled.

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
    )
    tls_listeners = [trio.SSLListener(lst, context, https_compatible=True) for lst in listeners]
    task_status.started(exchange)
    await trio.serve_listeners(exchange.serve_connection, tls_listeners)


async def _run_command(credentials: FakeCredentials, args: argparse.Namespace) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            exchange = await nursery.start(
                functools.partial(
                    serve_fake_exchange,
                    credentials,
                    host=args.host,
                    port=args.port,
                    balance_cents=args.balance_cents,
                    fill_rule=never_fill if args.fill_rule == "kill" else always_fill,
                )
            )
            line = json.dumps(
                {
                    "base_url": exchange.base_url,
                    "key_id": credentials.key_id,
                    "private_key_path": str(credentials.private_key_path),
                    "ca_file": str(credentials.ca_file),
                }
            )
            await trio.to_thread.run_sync(lambda: print(line, flush=True))
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def main(argv: list[str] | None = None) -> int:
    """``python -m executor.fake_exchange``: serve until SIGINT/SIGTERM; 0 on a clean stop."""
    parser = argparse.ArgumentParser(
        prog="python -m executor.fake_exchange", description="A local fake Kalshi exchange."
    )
    parser.add_argument("--port", type=_port, required=True, help="TCP port (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--dir", type=Path, help="where to write the credentials (default: temp)")
    parser.add_argument("--balance-cents", type=int, default=DEFAULT_BALANCE_CENTS)
    parser.add_argument("--fill-rule", choices=("fill", "kill"), default="fill")
    args = parser.parse_args(argv)
    try:
        directory = args.dir or Path(tempfile.mkdtemp(prefix="fake-exchange-"))
        credentials = FakeCredentials.generate(directory)
        trio.run(_run_command, credentials, args)
    except KeyboardInterrupt:  # a SIGINT before the signal receiver was installed
        return 0
    except (OSError, BaseExceptionGroup) as error:
        cause = _os_error(error)
        if cause is None:
            raise
        print(f"fake exchange: {cause}", file=sys.stderr)
        return 1
    return 0


def _os_error(error: BaseException) -> OSError | None:
    """The OSError behind ``error`` (a nursery wraps it in a group), if that is all it is."""
    if isinstance(error, OSError):
        return error
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _os_error(error.exceptions[0])
    return None


if __name__ == "__main__":
    sys.exit(main())
