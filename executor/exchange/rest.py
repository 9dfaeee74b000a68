"""The exchange's other requests, over httpx: the account poll, lookups, cancels, order groups.

Balance and positions (DISPATCH.md §7) are signed ``GET`` requests on a 30 s poll, where httpx's
request and response models (hundreds of µs a request) cost nothing that matters; orders do not
come here (``executor.exchange.orders.pool``). One long-lived HTTP/1.1 keep-alive
``httpx.AsyncClient``, TLS verified against the same context as the order connections. httpx runs
on Trio natively: httpcore picks its Trio backend when sniffio reports Trio.

Every request first takes its tokens (``executor.exchange.rate_limits``): a ``GET`` from the read
bucket, anything else (``send_json``: cancels, order groups) from the write bucket behind every
waiting order; both before signing, so the signed timestamp is fresh.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import trio

from executor.clock import wall_ms
from executor.exchange.messages import (
    API_PREFIX,
    BALANCE_PATH,
    JSON_CONTENT_TYPE,
    POSITIONS_PATH,
    ExchangeError,
    ExchangeTimeout,
    parse_position,
    parse_response,
)
from executor.exchange.rate_limits import RateLimits
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP, KalshiSigner

READ_TIMEOUT_S: Final = 10.0
"""Total budget of a balance or positions request: the account poll is not latency-critical."""
READ_CONNECT_TIMEOUT_S: Final = 3.0
"""Connect budget of a balance or positions request (DISPATCH.md §5)."""
KEEPALIVE_EXPIRY_S: Final = 45.0
"""Idle seconds before a pooled connection is dropped. The 30 s account poll keeps the connection
in use; past 45 s idle a fresh handshake beats writing into a connection that a load balancer may
have dropped silently (a guess: common idle timeouts are 60 s)."""
MAX_CONNECTIONS: Final = 2
"""httpx pool ceiling: the account poll's two requests, or a lookup beside a cancel (orders have
their own connections)."""
MAX_POSITION_PAGES: Final = 1000
"""Positions pages followed before giving up: a cursor that never ends is an exchange bug."""


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


def check_base_url(base_url: str) -> None:
    """Refuse a base URL that is not ``scheme://host[:port]``.

    Raises:
        ValueError: the URL has a path, query or trailing slash, or no host.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in {"https", "http"} or not parts.netloc or parts.path or parts.query:
        raise ValueError(
            f"exchange base URL {base_url!r}: want scheme://host[:port] with no path or slash"
        )


def open_http(base_url: str, context: ssl.SSLContext) -> httpx.AsyncClient:
    """The keep-alive HTTP/1.1 client for ``base_url`` (no proxy or netrc from the environment)."""
    return httpx.AsyncClient(
        base_url=base_url,
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


class RestClient:
    """Signed ``GET`` requests over one httpx client.

    Args:
        http: the shared ``httpx.AsyncClient`` (its ``base_url`` is the exchange).
        key_id: the API key id.
        signer: signs every request.
        limits: the account's token buckets (the published Basic tier when None).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        key_id: str,
        signer: KalshiSigner,
        limits: RateLimits | None = None,
    ) -> None:
        self._http = http
        self._key_id = key_id
        self._signer = signer
        self.limits = limits if limits is not None else RateLimits()
        self._read_timeout = httpx.Timeout(READ_TIMEOUT_S, connect=READ_CONNECT_TIMEOUT_S)

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

    async def get_json(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One signed ``GET path?params``, not retried; the JSON object it answered.

        Off the order path (account poll, reconciliation): its read tokens taken first, then
        signed on the loop, with the 10 s read budget.

        Raises:
            ExchangeError: the request failed, or the answer is not a JSON object.

        Cancellation: a cancelled wait for tokens sends nothing.
        """
        await self.limits.take("GET", path)
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

    async def send_json(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        items: int = 1,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One signed write (``DELETE``, ``PUT``, ``POST``) with a JSON body, not retried.

        Its write tokens (``items`` of them for a batch) are taken first, behind every waiting
        order; the signature covers the path without the query, as the exchange checks it.

        Raises:
            ExchangeError: the request failed, or the answer is not a JSON object.

        Cancellation: a cancelled wait for tokens sends nothing; a request cut mid-flight may
        have reached the exchange.
        """
        if not path.startswith(API_PREFIX):
            raise ValueError(f"{path!r}: a signed path starts with {API_PREFIX}")
        await self.limits.take(method, path, items)
        timestamp = str(wall_ms())
        signature = self._signer.sign(timestamp, method, path)
        request = self._http.build_request(
            method,
            path,
            params=params,
            content=body,
            headers=self._headers(timestamp, signature, with_body=body is not None),
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
                f"timed out: {describe_error(error)}", maybe_placed=not never_sent
            ) from None
        except httpx.TransportError as error:
            # A connect (or TLS) failure sent nothing; a read or write error may come after the
            # request reached the exchange.
            raise ExchangeError(
                f"connection error: {describe_error(error)}",
                maybe_placed=not isinstance(error, httpx.ConnectError),
            ) from None


def describe_error(error: Exception) -> str:
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
