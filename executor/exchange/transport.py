"""The exchange transport: signed HTTPS requests to Kalshi's REST API (DISPATCH.md §5, §7).

One long-lived HTTP/1.1 keep-alive ``httpx.AsyncClient`` per process, TLS verified against a CA
file (never switched off), pre-warmed before it is handed out. httpx runs on Trio natively: its
transport, httpcore, picks its Trio network backend when sniffio reports Trio, so no anyio event
loop is involved (anyio is only an installed dependency of httpx).

The transport knows nothing of telemetry, rows or the risk gate (a test reads the imports): it
fills a plain :class:`OrderStamps` with ``perf_counter_ns`` stamps and its caller records them.
Timeouts are cancel scopes owned here, where the budgets are known; the retry policy is data.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import structlog
import trio

from executor.clock import stamp_ns, wall_ms
from executor.exchange.messages import (
    BALANCE_PATH,
    DEFAULT_RETRY,
    ORDER_PATH,
    ORDERS_PATH,
    POSITIONS_PATH,
    ExchangeError,
    ExchangeTimeout,
    OrderSpec,
    OrderStamps,
    RetryPolicy,
    error_text,
    order_body,
    parse_position,
    parse_response,
)
from executor.exchange.token_bucket import TokenBucket
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP, KalshiSigner

__all__ = [
    "BALANCE_PATH",
    "DEFAULT_RETRY",
    "ORDERS_PATH",
    "ORDER_PATH",
    "POSITIONS_PATH",
    "ExchangeClient",
    "ExchangeEndpoint",
    "ExchangeError",
    "ExchangeTimeout",
    "OrderSpec",
    "OrderStamps",
    "RetryPolicy",
    "TokenBucket",
    "error_text",
    "open_exchange",
    "order_body",
    "parse_response",
]

ORDER_TIMEOUT_S: Final = 2.0
"""Total budget of one order attempt, send to last response byte (DISPATCH.md §5)."""
ORDER_CONNECT_TIMEOUT_S: Final = 1.0
"""Connect budget of an order attempt when the pool has no warm connection (DISPATCH.md §5)."""
READ_TIMEOUT_S: Final = 10.0
"""Total budget of a balance or positions request: the account poll is not latency-critical."""
READ_CONNECT_TIMEOUT_S: Final = 3.0
"""Connect budget of a balance or positions request (DISPATCH.md §5)."""

KEEPALIVE_EXPIRY_S: Final = 45.0
"""Idle seconds before a pooled connection is dropped. The 30 s account poll keeps the connection
in use; past 45 s idle a fresh handshake beats writing an order into a connection that a load
balancer may have dropped silently (a guess: common idle timeouts are 60 s)."""
MAX_CONNECTIONS: Final = 4
"""Pool ceiling: the risk gate allows 2 concurrent dispatches, plus the account poll, plus one."""
CLOSE_TIMEOUT_S: Final = 2.0
"""How long closing the pool may take at shutdown, shielded from the cancellation that ends it."""

TOKENS_PER_ORDER: Final = 10.0
"""Tokens one order attempt takes (DISPATCH.md §5)."""

MAX_POSITION_PAGES: Final = 1000
"""Positions pages followed before giving up: a cursor that never ends is an exchange bug."""

JSON_CONTENT_TYPE: Final = "application/json"

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class ExchangeEndpoint:
    """Where and as whom to trade.

    Attributes:
        base_url: scheme + host[:port], no path, no trailing slash.
        key_id: the API key id sent as ``KALSHI-ACCESS-KEY``.
        signer: signs every request with the account's private key.
        ca_file: PEM bundle to verify the server's certificate with; None = system trust store.
    """

    base_url: str
    key_id: str
    signer: KalshiSigner
    ca_file: Path | None = None


AsyncSign = Callable[[str, str, str], Awaitable[str]]
"""``(timestamp, method, path) -> signature``, awaited (e.g. a worker process's signer)."""


class ExchangeClient:
    """Signed requests over one pooled keep-alive client; made by :func:`open_exchange`.

    Args:
        http: the shared ``httpx.AsyncClient`` (its ``base_url`` is the exchange).
        endpoint: key id and signer.
        retry: the order retry policy.
        limiter: the order rate limiter (a fresh §5 bucket when None).
        jitter: uniform [0, 1) source for retry delays (tests pin it).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        endpoint: ExchangeEndpoint,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        limiter: TokenBucket | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._http = http
        self._key_id = endpoint.key_id
        self._signer = endpoint.signer
        self.retry = retry
        self.limiter = limiter if limiter is not None else TokenBucket()
        self._jitter = jitter
        self.shadow_signer: AsyncSign | None = None
        """Signs shadow orders instead of the endpoint's signer when set (another process's)."""
        self._order_timeout = httpx.Timeout(ORDER_TIMEOUT_S, connect=ORDER_CONNECT_TIMEOUT_S)
        self._read_timeout = httpx.Timeout(READ_TIMEOUT_S, connect=READ_CONNECT_TIMEOUT_S)
        # What AsyncClient.build_request would merge on every order (URL, the client's default
        # headers, the timeout), merged once: between the signature and the ``sent`` stamp it cost
        # ~0.3 ms a request (docs/RESULTS.md, 2026-11-30, the direct-request variant).
        self._order_url = http.base_url.join(ORDER_PATH)
        self._default_headers = list(http.headers.multi_items())
        self._order_extensions = {"timeout": self._order_timeout.as_dict()}

    async def place_order(
        self, body: bytes, stamps: OrderStamps, *, dry_run: bool
    ) -> dict[str, Any]:
        """Send one order (DISPATCH.md §5), retrying per the policy; return the parsed response.

        A shadow fire (``dry_run``) takes no rate-limit token, signs and builds the request
        exactly like a real one, stamps ``sent_ns`` and returns ``{}`` with no network I/O.

        Raises:
            ExchangeTimeout: an attempt got no response within ``ORDER_TIMEOUT_S`` (not retried).
            ExchangeError: the last attempt failed, or a failure that is not retryable.

        Cancellation: ``stamps`` holds whatever the current attempt reached.
        """
        while True:
            try:
                return await self._order_attempt(body, stamps, dry_run=dry_run)
            except ExchangeError as error:
                stamps.maybe_placed = stamps.maybe_placed or error.maybe_placed
                if stamps.attempts >= self.retry.max_attempts or not self.retry.retryable(error):
                    raise
                delay_s = self.retry.delay_s(stamps.attempts, self._jitter())
                log.warning(
                    "exchange order failed, retrying",
                    attempt=stamps.attempts,
                    retry_in_s=round(delay_s, 3),
                    error=str(error),
                )
                await trio.sleep(delay_s)

    async def _order_attempt(
        self, body: bytes, stamps: OrderStamps, *, dry_run: bool
    ) -> dict[str, Any]:
        stamps.sign_start_ns = stamps.sign_end_ns = stamps.sent_ns = stamps.ack_ns = None
        stamps.attempts += 1
        if not dry_run:
            # Before the timestamp, so a wait in line never signs a stale time.
            await self.limiter.acquire(TOKENS_PER_ORDER)
        timestamp = str(wall_ms())
        stamps.sign_start_ns = stamp_ns()
        if dry_run and self.shadow_signer is not None:
            signature = await self.shadow_signer(timestamp, "POST", ORDER_PATH)
        else:
            signature = self._signer.sign(timestamp, "POST", ORDER_PATH)
        stamps.sign_end_ns = stamp_ns()
        headers = [
            *self._default_headers,
            *self._headers(timestamp, signature, with_body=True).items(),
        ]
        request = httpx.Request(
            "POST",
            self._order_url,
            content=body,
            headers=headers,
            extensions=self._order_extensions,
        )
        stamps.sent_ns = stamp_ns()
        if dry_run:
            return {}
        response = await self._send(request, ORDER_TIMEOUT_S)
        stamps.ack_ns = stamp_ns()
        return parse_response(response)

    async def get_balance_cents(self) -> int:
        """The account balance in cents (``GET /portfolio/balance``), signed, not retried.

        Raises:
            ExchangeError: the request failed or the answer has no integer ``balance``.
        """
        payload = await self.get_json(BALANCE_PATH)
        balance = payload.get("balance")
        if not isinstance(balance, int) or isinstance(balance, bool):
            raise ExchangeError(f"balance response has no integer 'balance': {payload!r:.200}")
        return balance

    async def get_positions(self) -> dict[str, float]:
        """Open contracts per ticker (``abs(float(position_fp))``, zeros omitted), all pages.

        Raises:
            ExchangeError: a page failed, was malformed, or the cursor never ended.
        """
        positions: dict[str, float] = {}
        params: dict[str, str] | None = None
        for _ in range(MAX_POSITION_PAGES):
            payload = await self.get_json(POSITIONS_PATH, params)
            entries = payload.get("market_positions") or []
            if not isinstance(entries, list):
                raise ExchangeError("positions response: 'market_positions' is not a list")
            for entry in entries:
                ticker, contracts = parse_position(entry)
                if contracts:
                    positions[ticker] = contracts
            cursor = payload.get("cursor")
            if not cursor:
                return positions
            params = {"cursor": str(cursor)}
        raise ExchangeError(f"positions: cursor still set after {MAX_POSITION_PAGES} pages")

    async def get_json(
        self, path: str, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """One signed ``GET path?params``, not retried; the JSON object it answered.

        Off the order path (account poll, reconciliation): signed on the loop, with the 10 s
        read budget.

        Raises:
            ExchangeError: the request failed, or the answer is not a JSON object.
        """
        timestamp = str(wall_ms())
        signature = self._signer.sign(timestamp, "GET", path)
        request = self._http.build_request(
            "GET",
            path,
            params=params,
            headers=self._headers(timestamp, signature, with_body=False),
            timeout=self._read_timeout,
        )
        return parse_response(await self._send(request, READ_TIMEOUT_S))

    def _headers(self, timestamp: str, signature: str, *, with_body: bool) -> dict[str, str]:
        headers = {
            HEADER_KEY: self._key_id,
            HEADER_TIMESTAMP: timestamp,
            HEADER_SIGNATURE: signature,
        }
        if with_body:
            headers["Content-Type"] = JSON_CONTENT_TYPE
        return headers

    async def _send(self, request: httpx.Request, budget_s: float) -> httpx.Response:
        """Send ``request`` and read the whole response within ``budget_s``.

        Cancellation: a request cut mid-flight leaves its connection closed by httpcore, never
        returned to the pool half-read.
        """
        try:
            with trio.fail_after(budget_s):
                return await self._http.send(request)
        except trio.TooSlowError:
            raise ExchangeTimeout(f"no response within {budget_s:g} s") from None
        except httpx.TimeoutException as error:
            # No connection, or none free: the request never left, so nothing can have happened.
            never_sent = isinstance(error, (httpx.ConnectTimeout, httpx.PoolTimeout))
            raise ExchangeTimeout(
                f"timed out: {_describe(error)}", maybe_placed=not never_sent
            ) from None
        except httpx.TransportError as error:
            # A connect (or TLS) failure sent nothing; a read or write error may come after the
            # request reached the exchange.
            raise ExchangeError(
                f"connection error: {_describe(error)}",
                maybe_placed=not isinstance(error, httpx.ConnectError),
            ) from None


def _describe(error: Exception) -> str:
    """``Type: message``; an empty message borrows the first one down the cause chain, since
    httpx re-raises a TLS failure as a bare ConnectError over trio's BrokenResourceError."""
    detail = str(error)
    cause = error.__cause__ or error.__context__
    while not detail and cause is not None:
        detail = str(cause)
        cause = cause.__cause__ or cause.__context__
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


def tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """A verifying client TLS context (hostname and chain checked), trusting ``ca_file`` if given.

    Blocking (reads files): call it from a worker thread on the loop.

    Raises:
        ValueError: the CA file is missing, unreadable or not PEM certificates.
    """
    try:
        return ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
    except FileNotFoundError:
        raise ValueError(f"exchange CA file {str(ca_file)!r}: no such file") from None
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"exchange CA file {str(ca_file)!r}: not usable ({error})") from None


def _check_base_url(base_url: str) -> None:
    parts = urlsplit(base_url)
    if parts.scheme not in {"https", "http"} or not parts.netloc or parts.path or parts.query:
        raise ValueError(
            f"exchange base URL {base_url!r}: want scheme://host[:port] with no path or slash"
        )


@asynccontextmanager
async def open_exchange(
    endpoint: ExchangeEndpoint,
    *,
    prewarm: bool = True,
    retry: RetryPolicy = DEFAULT_RETRY,
    limiter: TokenBucket | None = None,
) -> AsyncIterator[ExchangeClient]:
    """One keep-alive HTTP/1.1 client, TLS verified, pre-warmed, closed on exit.

    Pre-warming is one signed balance request: the TCP and TLS handshakes (and a credentials
    check) happen before the first order, not inside its budget.

    Raises:
        ValueError: a malformed base URL or an unusable CA file.
        ExchangeError: the pre-warm request failed (unreachable exchange, TLS or key refused).

    Cancellation: closing the pool is shielded for at most ``CLOSE_TIMEOUT_S``.
    """
    _check_base_url(endpoint.base_url)
    context = await trio.to_thread.run_sync(tls_context, endpoint.ca_file)
    http = httpx.AsyncClient(
        base_url=endpoint.base_url,
        verify=context,
        http1=True,
        http2=False,
        trust_env=False,  # no proxy or netrc from the environment between us and the exchange
        limits=httpx.Limits(
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        ),
        timeout=httpx.Timeout(READ_TIMEOUT_S, connect=READ_CONNECT_TIMEOUT_S),
    )
    try:
        client = ExchangeClient(http, endpoint, retry=retry, limiter=limiter)
        if prewarm:
            await client.get_balance_cents()
        yield client
    finally:
        with trio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            await http.aclose()
