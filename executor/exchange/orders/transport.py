"""The exchange transport: signed HTTPS requests to Kalshi's REST API (DISPATCH.md §5, §7, §10).

Orders go over the order path's own connections (``executor.exchange.orders.pool``): opened and
TLS-handshaken at start-up, kept alive, each request made from a template proved equal to h11's
serialisation (``order_template``), each response parsed by llhttp (``order_response``). The rest
(the account poll, start-up checks) goes through one keep-alive ``httpx.AsyncClient``
(``executor.exchange.rest``), whose models cost hundreds of µs a request, fine off the order
path. Both verify TLS against the same CA file and are pre-warmed before the client is handed out.

An order attempt that wrote any byte and then lost its connection raises
:class:`ExchangeAmbiguous` (as a timeout raises :class:`ExchangeTimeout`, one of its kind): never
retried, for reconciliation to decide. An attempt that failed before writing (a connection that
could not be opened) is a plain, retryable :class:`ExchangeError`. A 409 on an order ("already
exists": an earlier attempt or delivery placed it) is an :class:`ExchangeError` that says the
order may be placed, so it is looked up, never retried.

The transport knows nothing of telemetry, rows or the risk gate (a test reads the imports): it
fills a plain :class:`OrderStamps` with ``perf_counter_ns`` stamps and its caller records them.
Timeouts are cancel scopes owned here, where the budgets are known; the retry policy is data.
A real order's first attempt may be written where its fire is decided, without waiting
(:meth:`ExchangeClient.send_order_now`), and finished by ``place_order`` in the fire's task.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
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
    ExchangeAmbiguous,
    ExchangeError,
    ExchangeTimeout,
    OrderSpec,
    OrderStamps,
    RetryPolicy,
    error_text,
    order_body,
    parse_order_answer,
    parse_response,
)
from executor.exchange.orders.connection import OrderConnection, OrderInFlight
from executor.exchange.orders.pool import (
    CONNECT_TIMEOUT_S,
    ORDER_CONNECTIONS,
    OrderPool,
    tls_opener,
)
from executor.exchange.orders.presign import AsyncSign, SignaturePool
from executor.exchange.orders.template import OrderTemplate
from executor.exchange.rate_limits import ApiLimits, RateLimits
from executor.exchange.rest import (
    ExchangeEndpoint,
    RestClient,
    check_base_url,
    describe_error,
    open_http,
    tls_context,
)
from executor.exchange.token_bucket import TokenBucket

__all__ = [
    "BALANCE_PATH",
    "DEFAULT_RETRY",
    "ORDERS_PATH",
    "ORDER_PATH",
    "POSITIONS_PATH",
    "ExchangeAmbiguous",
    "ExchangeClient",
    "ExchangeEndpoint",
    "ExchangeError",
    "ExchangeTimeout",
    "OrderInFlight",
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
ORDER_CONNECT_TIMEOUT_S: Final = CONNECT_TIMEOUT_S
"""Connect budget of an order attempt when the pool has no warm connection (DISPATCH.md §5)."""

CLOSE_TIMEOUT_S: Final = 2.0
"""How long closing the pool may take at shutdown, shielded from the cancellation that ends it."""

TOKENS_PER_ORDER: Final = 10.0
"""Tokens one order attempt takes by default (DISPATCH.md §5; ``RateLimits.order_tokens``)."""

log = structlog.get_logger()


class ExchangeClient:
    """Signed requests: orders over the order pool, the rest over httpx; see :func:`open_exchange`.

    Args:
        http: the shared ``httpx.AsyncClient`` (its ``base_url`` is the exchange).
        endpoint: key id and signer.
        orders: the order connections.
        template: the order request template for this exchange.
        retry: the order retry policy.
        limiter: the write bucket orders draw on (None: the Basic tier's, DISPATCH.md §5's).
        jitter: uniform [0, 1) source for retry delays (tests pin it).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        endpoint: ExchangeEndpoint,
        orders: OrderPool,
        template: OrderTemplate,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        limiter: TokenBucket | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.rest = RestClient(http, endpoint.key_id, endpoint.signer, RateLimits(write=limiter))
        self._signer = endpoint.signer
        self.orders = orders
        self.template = template
        self.retry = retry
        self.limiter = self.rest.limits.write  # the bucket real orders draw on
        self._jitter = jitter
        self.shadow_signer: AsyncSign | None = None
        """Signs shadow orders instead of the endpoint's signer when set (another process's)."""
        self.signatures: SignaturePool | None = None
        """Order signatures made ahead (``--presign-max-age-ms``); None = always sign inline."""
        self.presigned = 0
        """Real order attempts that used a signature made ahead."""
        self.signed_inline = 0
        """Real order attempts that signed inline (no pool, or none fresh enough)."""

    def use_limits(self, limits: ApiLimits) -> None:
        """Trade with these budgets from now on (fresh buckets: call it before any order)."""
        self.rest.limits = RateLimits(limits)
        self.limiter = self.rest.limits.write

    async def place_order(
        self,
        body: bytes,
        stamps: OrderStamps,
        *,
        dry_run: bool,
        started: OrderInFlight | None = None,
    ) -> dict[str, Any]:
        """Send one order (DISPATCH.md §5), retrying per the policy; return the parsed response.

        A shadow fire (``dry_run``) takes no rate-limit token, signs and builds the request
        exactly like a real one, stamps ``sent_ns`` and returns ``{}`` with no network I/O.
        ``started``: a first attempt :meth:`send_order_now` wrote, finished (and retried) here.

        Raises:
            ExchangeTimeout: an attempt got no response within ``ORDER_TIMEOUT_S`` (not retried).
            ExchangeError: the last attempt failed, or a failure that is not retried.

        Cancellation: ``stamps`` holds whatever the current attempt reached.
        """
        while True:
            try:
                if started is not None:
                    attempt, started = started, None
                    return await self._finish_attempt(attempt, body, stamps)
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

    def send_order_now(self, body: bytes, stamps: OrderStamps) -> OrderInFlight | None:
        """Write a real order's first attempt now, without waiting, or None (nothing done).

        Only when nothing would wait: a rate-limit token free with nobody in line and a live idle
        connection. Then the token is taken, the signature had (made ahead, or signed here), the
        request built and handed to the kernel, exactly as :meth:`place_order`'s attempt would;
        the rest (the response, bytes the kernel did not take, a failure to raise) is for
        ``place_order(..., started=...)``, which must follow. None: nothing was touched.

        Cancellation: never checkpoints.
        """
        connection = self.orders.checkout_now()
        if connection is None:
            return None
        if not self.limiter.try_acquire(self.rest.limits.order_tokens):
            self.orders.checkin(connection)  # unused: back to the idle ones
            return None
        stamps.reset()
        stamps.attempts += 1
        return self._begin_attempt(connection, body, stamps)

    async def _order_attempt(
        self, body: bytes, stamps: OrderStamps, *, dry_run: bool
    ) -> dict[str, Any]:
        stamps.reset()
        stamps.attempts += 1
        if dry_run:
            timestamp, signature = await self._signature(stamps, dry_run=True)
            self.template.request(timestamp, signature, body)  # built exactly like a real one
            stamps.sent_ns = stamp_ns()
            return {}
        # The token, then a live connection, then the timestamp: a wait in line or a connect
        # never signs a stale time.
        await self.limiter.acquire(self.rest.limits.order_tokens)
        connection = await self.orders.checkout()
        attempt = self._begin_attempt(connection, body, stamps)
        return await self._finish_attempt(attempt, body, stamps)

    def _begin_attempt(
        self, connection: OrderConnection, body: bytes, stamps: OrderStamps
    ) -> OrderInFlight:
        """Sign, build and begin writing a real attempt on a checked-out connection."""
        try:
            timestamp, signature = self._real_signature(stamps)
            request = self.template.request(timestamp, signature, body)
            stamps.sent_ns = stamp_ns()
            connection.begin(request, body, stamps)
        except BaseException:
            self._end_attempt(connection, stamps)
            raise
        return OrderInFlight(connection)

    async def _finish_attempt(
        self, attempt: OrderInFlight, body: bytes, stamps: OrderStamps
    ) -> dict[str, Any]:
        connection = attempt.connection
        try:
            try:
                with trio.fail_after(ORDER_TIMEOUT_S):
                    status, reason, payload = await connection.finish(stamps)
            except trio.TooSlowError:
                raise ExchangeTimeout(f"no response within {ORDER_TIMEOUT_S:g} s") from None
            stamps.ack_ns = stamp_ns()
        finally:
            self._end_attempt(connection, stamps)
        return parse_order_answer(status, reason, payload)

    def _end_attempt(self, connection: OrderConnection, stamps: OrderStamps) -> None:
        self.orders.checkin(connection)
        if stamps.signature == "presigned" and self.signatures is not None:
            self.signatures.order_done()

    def place_shadow_now(self, body: bytes, stamps: OrderStamps) -> bool:
        """A shadow order with a spare signature made ahead, at once, or False (none spare).

        Exactly what ``place_order(..., dry_run=True)`` does with a pool hit (take the
        signature, build the request from the template, stamp ``sent``), without awaiting: the
        fire task finishes it in place, with no hop to the shadow lane. Sends nothing.
        """
        pool = self.signatures
        if pool is None:
            return False
        sign_start_ns = stamp_ns()
        ready = pool.take_spare()
        if ready is None:
            return False
        stamps.reset()
        stamps.attempts += 1
        stamps.sign_start_ns = sign_start_ns
        stamps.sign_end_ns = stamp_ns()
        stamps.signature = "presigned"
        self.template.request(ready[0], ready[1], body)  # built exactly like a real one
        stamps.sent_ns = stamp_ns()
        return True

    async def _signature(self, stamps: OrderStamps, *, dry_run: bool) -> tuple[str, str]:
        """(timestamp, signature) of ``POST`` + the order path, stamping the ``sign`` span.

        A real order's is :meth:`_real_signature`'s. A shadow fire takes only a spare signature
        made ahead, else signs now (in the shadow signer's process when there is one).
        """
        if not dry_run:
            return self._real_signature(stamps)
        stamps.sign_start_ns = stamp_ns()
        pool = self.signatures
        ready = None if pool is None else pool.take_spare()
        if ready is not None:
            stamps.sign_end_ns = stamp_ns()
            stamps.signature = "presigned"
            return ready
        timestamp = str(wall_ms())
        if self.shadow_signer is not None:
            signature = await self.shadow_signer(timestamp, "POST", ORDER_PATH)
        else:
            signature = self._signer.sign(timestamp, "POST", ORDER_PATH)
        stamps.sign_end_ns = stamp_ns()
        stamps.signature = "inline"
        return timestamp, signature

    def _real_signature(self, stamps: OrderStamps) -> tuple[str, str]:
        """A real order's (timestamp, signature): the freshest made ahead when the pool has one
        fresh enough, else one made now for a fresh timestamp (on the loop: it never waits).

        The ``sign`` span is what this took (a pool hit: microseconds) and ``stamps.signature``
        says which it was.
        """
        stamps.sign_start_ns = stamp_ns()
        pool = self.signatures
        ready = None if pool is None else pool.take()
        if ready is not None:
            stamps.sign_end_ns = stamp_ns()
            stamps.signature = "presigned"
            self.presigned += 1
            return ready
        self.signed_inline += 1
        timestamp = str(wall_ms())
        signature = self._signer.sign(timestamp, "POST", ORDER_PATH)
        stamps.sign_end_ns = stamp_ns()
        stamps.signature = "inline"
        return timestamp, signature

    async def get_balance_cents(self) -> int:
        """The account balance in cents (``GET /portfolio/balance``); see :class:`RestClient`."""
        return await self.rest.get_balance_cents()

    async def get_positions(self) -> dict[str, float]:
        """Open contracts per ticker, all pages; see :class:`RestClient`."""
        return await self.rest.get_positions()

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One signed ``GET path?params``, not retried; see :meth:`RestClient.get_json`."""
        return await self.rest.get_json(path, params)


@asynccontextmanager
async def open_exchange(
    endpoint: ExchangeEndpoint,
    *,
    prewarm: bool = True,
    retry: RetryPolicy = DEFAULT_RETRY,
    limiter: TokenBucket | None = None,
    order_connections: int = ORDER_CONNECTIONS,
    nursery: trio.Nursery | None = None,
) -> AsyncIterator[ExchangeClient]:
    """The order connections and one keep-alive httpx client, TLS verified, closed on exit.

    Pre-warming opens and handshakes the order connections and sends one signed balance request
    through httpx (its handshake and a credentials check), all before the first order. Without
    it the order connections open on the first order's demand (within its connect budget).
    With a ``nursery``, the pool's maintenance (dead and stale connections replaced in the
    background) runs there until the block ends; without one, an order still finds a dead
    connection before writing on it and opens a fresh one.

    Raises:
        ValueError: a malformed base URL, an unusable CA file, or a base URL that is not https.
        ExchangeError: the pre-warm failed (unreachable exchange, TLS or key refused).

    Cancellation: closing the httpx pool is shielded for at most ``CLOSE_TIMEOUT_S``; the order
    connections close at once.
    """
    check_base_url(endpoint.base_url)
    parts = urlsplit(endpoint.base_url)
    if parts.scheme != "https" or parts.hostname is None:
        raise ValueError(f"exchange base URL {endpoint.base_url!r}: orders need https://host")
    context = await trio.to_thread.run_sync(tls_context, endpoint.ca_file)
    template = OrderTemplate(parts.netloc, endpoint.key_id)
    pool = OrderPool(
        tls_opener(parts.hostname, parts.port or 443, context, template), size=order_connections
    )
    http = open_http(endpoint.base_url, context)
    try:
        client = ExchangeClient(http, endpoint, pool, template, retry=retry, limiter=limiter)
        if prewarm:
            await client.get_balance_cents()
            try:
                await pool.fill()
            except (OSError, ssl.SSLError, trio.TooSlowError) as error:
                raise ExchangeError(f"order connections: {describe_error(error)}") from None
        if nursery is not None:
            await nursery.start(pool.maintain)
        yield client
    finally:
        pool.close()
        with trio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            await http.aclose()
