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
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import httpx
import orjson
import structlog
import trio

from executor.clock import stamp_ns, wall_ms
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP, KalshiSigner

ORDER_PATH: Final = "/trade-api/v2/portfolio/events/orders"
BALANCE_PATH: Final = "/trade-api/v2/portfolio/balance"
POSITIONS_PATH: Final = "/trade-api/v2/portfolio/positions"

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

BUCKET_CAPACITY: Final = 100.0
"""Rate-limit tokens the bucket holds when full (DISPATCH.md §5)."""
BUCKET_REFILL_PER_S: Final = 100.0
"""Tokens added per second (DISPATCH.md §5): ten orders a second sustained, a burst of ten."""
TOKENS_PER_ORDER: Final = 10.0
"""Tokens one order attempt takes (DISPATCH.md §5)."""

MAX_POSITION_PAGES: Final = 1000
"""Positions pages followed before giving up: a cursor that never ends is an exchange bug."""
MAX_ERROR_TEXT_CHARS: Final = 1000
"""An error body is quoted up to this many characters: a proxy's HTML page is not an audit row."""

JSON_CONTENT_TYPE: Final = "application/json"

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class OrderSpec:
    """One order's fields, already in wire form; ``order_body`` turns it into the exact bytes.

    ``post_only`` is not a field: it is true exactly when ``time_in_force`` is
    ``good_till_canceled`` (DISPATCH.md §4 step 3).
    """

    ticker: str
    client_order_id: str
    side: Literal["bid", "ask"]
    count: int
    price: str
    time_in_force: str
    self_trade_prevention_type: str
    exchange_index: int


def order_body(spec: OrderSpec) -> bytes:
    """The compact JSON body of DISPATCH.md §5, keys in the order the exchange documents.

    orjson keeps a dict literal's insertion order, which is the §5 order written out below; a
    golden test holds the bytes.

    Raises:
        ValueError: ``count`` is below 1 (the exchange and the audit CHECK both refuse it).
    """
    if spec.count < 1:
        raise ValueError(f"order count must be >= 1, got {spec.count}")
    return orjson.dumps(
        {
            "ticker": spec.ticker,
            "client_order_id": spec.client_order_id,
            "side": spec.side,
            "count": f"{spec.count}.00",
            "price": spec.price,
            "time_in_force": spec.time_in_force,
            "self_trade_prevention_type": spec.self_trade_prevention_type,
            "post_only": spec.time_in_force == "good_till_canceled",
            "exchange_index": spec.exchange_index,
        }
    )


@dataclass(slots=True)
class OrderStamps:
    """``perf_counter_ns`` stamps of the current attempt (None = not reached) and attempts made.

    The four stamps are reset at the start of every attempt, so a retried order reports the
    attempt that resolved it, never a mix of two.
    """

    sign_start_ns: int | None = None
    sign_end_ns: int | None = None
    sent_ns: int | None = None
    ack_ns: int | None = None
    attempts: int = 0


class ExchangeError(Exception):
    """A request failed; ``str(error)`` is the DISPATCH.md §5 text (it lands in ``error_message``).

    Attributes:
        status: the HTTP status, or None when no response came (connection error, timeout).
    """

    def __init__(self, text: str, *, status: int | None = None) -> None:
        super().__init__(text)
        self.status = status


class ExchangeTimeout(ExchangeError):
    """No response within the budget. Never retried: the order may have been placed."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which failures an order retries, how often, and how long it waits (DISPATCH.md §5).

    Delay before attempt k+1: ``min(max_delay_s, base_delay_s * 2**(k-1)) * (0.5 + jitter/2)``
    with ``jitter`` uniform in [0, 1). Connection errors (no status) are always retryable;
    timeouts never are.
    """

    max_attempts: int = 3
    retry_statuses: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    base_delay_s: float = 0.25
    max_delay_s: float = 2.0

    def retryable(self, error: ExchangeError) -> bool:
        """Whether ``error`` may be retried (a timeout never)."""
        if isinstance(error, ExchangeTimeout):
            return False
        return error.status is None or error.status in self.retry_statuses

    def delay_s(self, attempt: int, jitter: float) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), for ``jitter`` in [0, 1)."""
        return min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1)) * (0.5 + jitter / 2)


DEFAULT_RETRY: Final = RetryPolicy()


class TokenBucket:
    """A token bucket with FIFO waiters, on Trio's clock.

    Waiters queue on a ``trio.Lock``, which is fair (first come, first served); the holder sleeps
    until enough tokens have accrued. When nobody waits and tokens suffice, ``acquire`` takes them
    without a checkpoint, so an uncontended order does not yield the loop to other tasks.

    Cancellation: a cancelled waiter leaves the queue without taking anything.
    """

    def __init__(
        self, capacity: float = BUCKET_CAPACITY, refill_per_s: float = BUCKET_REFILL_PER_S
    ) -> None:
        if capacity <= 0 or refill_per_s <= 0:
            raise ValueError("token bucket capacity and refill rate must be positive")
        self.capacity = capacity
        self.refill_per_s = refill_per_s
        self._tokens = capacity
        self._updated: float | None = None
        self._lock = trio.Lock()

    def available(self) -> float:
        """Tokens in the bucket now (after refilling for the time elapsed)."""
        now = trio.current_time()
        if self._updated is not None:
            elapsed = now - self._updated
            self._tokens = min(self.capacity, self._tokens + elapsed * self.refill_per_s)
        self._updated = now
        return self._tokens

    async def acquire(self, tokens: float) -> None:
        """Take ``tokens``, waiting in line behind earlier callers until they have accrued."""
        if not 0 < tokens <= self.capacity:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of {self.capacity}")
        if not self._lock.locked() and self.available() >= tokens:
            self._tokens -= tokens
            return
        async with self._lock:
            missing = tokens - self.available()
            if missing > 0:
                await trio.sleep(missing / self.refill_per_s)
                # Credit the wait; float rounding may leave a hair short, which is taken anyway.
                self.available()
            self._tokens -= tokens


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


def error_text(status: int, reason: str, body: bytes) -> str:
    """The DISPATCH.md §5 text for a failed response: the exchange's code and message if given."""
    try:
        payload = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and "code" in error and "message" in error:
            return f"{status} {error['code']}: {error['message']}"
    text = body.decode("utf-8", errors="replace").strip()
    if len(text) > MAX_ERROR_TEXT_CHARS:
        text = text[:MAX_ERROR_TEXT_CHARS] + "..."
    return f"{status} {reason}: {text}" if text else f"{status} {reason}"


def parse_response(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a 2xx response (``{}`` when empty); anything else raises.

    Raises:
        ExchangeError: a non-2xx status (§5 text), or a 2xx body that is not a JSON object.
    """
    status, body = response.status_code, response.content
    # A server may send an empty reason phrase; the standard one keeps the §5 text readable.
    reason = response.reason_phrase or httpx.codes.get_reason_phrase(status)
    if not 200 <= status < 300:
        raise ExchangeError(error_text(status, reason, body), status=status)
    if not body.strip():
        return {}
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        snippet = body[:200].decode("utf-8", errors="replace")
        raise ExchangeError(
            f"{status} {reason}: response is not JSON: {snippet}", status=status
        ) from None
    if not isinstance(payload, dict):
        raise ExchangeError(f"{status} {reason}: response is not a JSON object", status=status)
    return payload


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
        self._order_timeout = httpx.Timeout(ORDER_TIMEOUT_S, connect=ORDER_CONNECT_TIMEOUT_S)
        self._read_timeout = httpx.Timeout(READ_TIMEOUT_S, connect=READ_CONNECT_TIMEOUT_S)

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
        signature = self._signer.sign(timestamp, "POST", ORDER_PATH)
        stamps.sign_end_ns = stamp_ns()
        request = self._http.build_request(
            "POST",
            ORDER_PATH,
            content=body,
            headers=self._headers(timestamp, signature, with_body=True),
            timeout=self._order_timeout,
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
        payload = await self._get(BALANCE_PATH)
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
            payload = await self._get(POSITIONS_PATH, params)
            entries = payload.get("market_positions") or []
            if not isinstance(entries, list):
                raise ExchangeError("positions response: 'market_positions' is not a list")
            for entry in entries:
                ticker, contracts = _position(entry)
                if contracts:
                    positions[ticker] = contracts
            cursor = payload.get("cursor")
            if not cursor:
                return positions
            params = {"cursor": str(cursor)}
        raise ExchangeError(f"positions: cursor still set after {MAX_POSITION_PAGES} pages")

    async def _get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
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
            raise ExchangeTimeout(f"timed out: {_describe(error)}") from None
        except httpx.TransportError as error:
            raise ExchangeError(f"connection error: {_describe(error)}") from None


def _position(entry: object) -> tuple[str, float]:
    if not isinstance(entry, dict):
        raise ExchangeError(f"positions response: entry is not an object: {entry!r:.200}")
    try:
        ticker = entry["ticker"]
        contracts = abs(float(entry["position_fp"]))
    except (KeyError, TypeError, ValueError):
        raise ExchangeError(f"positions response: malformed entry {entry!r:.200}") from None
    if not isinstance(ticker, str):
        raise ExchangeError(f"positions response: ticker is not a string: {entry!r:.200}")
    return ticker, contracts


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
