"""The asyncio baseline's fire path: the reference's order dispatch over aiohttp (benchmark only).

Written the way the reference writes it, so the Trio executor's fire path has an honest opponent:
after the ack the connection loop ``create_task``s the fire; the fire builds the order (the same
``executor.exchange.orders.transport.order_body`` bytes the Trio transport sends), takes a
rate-limit token (real fires), timestamps, signs **on the event loop** with
``executor.signer.KalshiSigner``, builds the four headers and stamps ``sent``. A shadow fire
(``dry_run``) stops there. A real fire ``POST``s through one pre-warmed keep-alive
``aiohttp.ClientSession`` and reads the whole response.

Absent (confounds the benchmark names): risk gate, sizing (fixed count), audit rows. aiohttp
builds its request inside ``post()``, after the ``sent`` stamp.

The ``wire`` stamp (docs/performance/plan/, 2026-12-01): :func:`install_wire_stamp` wraps the two
methods through which aiohttp's stream writer hands bytes to the transport and stamps, after each
write, the fire's ``OrderStamps`` found in a context variable (aiohttp's write task inherits it):
the last write is the request's last byte; one ``ContextVar.get`` and a clock read a write.

Configured by the reference's ``KALSHI_*`` variables (:func:`config_from_env`); demo only.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import random
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Final

import aiohttp

from bench.baselines.rowwriter import RowWriter
from executor.clock import clock_domain
from executor.exchange.orders.stages import FireStamps, path_us
from executor.exchange.orders.transport import (
    BALANCE_PATH,
    ORDER_PATH,
    OrderSpec,
    OrderStamps,
    order_body,
)
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP, KalshiSigner
from executor.wire.protocol import WakeMessage

DEMO_BASE_URL: Final = "https://external-api.demo.kalshi.co"
"""The reference's demo default, used when ``KALSHI_DEMO_BASE_URL`` is unset."""

ORDER_TIMEOUT: Final = aiohttp.ClientTimeout(total=2.0, connect=1.0)
"""An order attempt's budget (DISPATCH.md §5: 2.0 s in total, 1.0 s to connect)."""
READ_TIMEOUT: Final = aiohttp.ClientTimeout(total=10.0, connect=3.0)
"""Every other request's budget (DISPATCH.md §5)."""

MAX_ATTEMPTS: Final = 3
"""Order attempts at most (DISPATCH.md §5); a timeout is never retried."""
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
BUCKET_CAPACITY: Final = 100.0
"""Rate-limit tokens when full (DISPATCH.md §5)."""
BUCKET_REFILL_PER_S: Final = 100.0
"""Tokens added per second (DISPATCH.md §5)."""
TOKENS_PER_ORDER: Final = 10.0
"""Tokens one order attempt takes (DISPATCH.md §5)."""
POOL_CONNECTIONS: Final = 4
"""Keep-alive connections at most: the same ceiling as the Trio transport's pool."""

METADATA: Final = {True: '{"dry_run": true}', False: '{"dry_run": false}'}
"""The stage rows' ``metadata_json``, spelled like the ``wake_recv`` rows'."""


_wire_stamps: contextvars.ContextVar[OrderStamps | None] = contextvars.ContextVar(
    "baseline_wire_stamps", default=None
)
"""The stamps of the order the current task is writing (None outside an order)."""


def install_wire_stamp() -> None:
    """Stamp ``wire_ns`` after each of aiohttp's writes to the transport (idempotent)."""
    from aiohttp import http_writer

    writer = http_writer.StreamWriter
    if getattr(writer, "_wire_stamp_installed", False):
        return
    write, writelines = writer._write, writer._writelines

    def _write(self: http_writer.StreamWriter, chunk: bytes) -> None:
        write(self, chunk)
        stamps = _wire_stamps.get()
        if stamps is not None:
            stamps.wire_ns = time.perf_counter_ns()

    def _writelines(self: http_writer.StreamWriter, chunks: object) -> None:
        writelines(self, chunks)  # type: ignore[arg-type]
        stamps = _wire_stamps.get()
        if stamps is not None:
            stamps.wire_ns = time.perf_counter_ns()

    writer._write = _write  # type: ignore[method-assign,assignment]
    writer._writelines = _writelines  # type: ignore[method-assign]
    writer._wire_stamp_installed = True  # type: ignore[attr-defined]


class BaselineConfigError(ValueError):
    """A missing or unusable variable; the text is one line naming it."""


class OrderFailed(Exception):
    """An order attempt failed; ``retryable`` says whether the §5 policy may try again."""

    def __init__(self, text: str, *, retryable: bool) -> None:
        super().__init__(text)
        self.retryable = retryable


@dataclasses.dataclass(frozen=True)
class BaselineExchangeConfig:
    """Where the baseline sends orders and how it shapes them."""

    base_url: str
    key_id: str
    private_key_path: Path
    ca_file: Path | None = None
    time_in_force: str = "fill_or_kill"
    self_trade_prevention_type: str = "taker_at_cross"
    contract_count: int = 1


def config_from_env(environ: Mapping[str, str]) -> BaselineExchangeConfig | None:
    """The exchange configuration, or None when no credentials are set (no-op fires).

    Raises:
        BaselineConfigError: half the credentials, a production environment, a bad count.
    """
    key_id = environ.get("KALSHI_API_KEY_ID", "").strip()
    key_path = environ.get("KALSHI_PRIVATE_KEY_PATH", "").strip()
    if not key_id and not key_path:
        return None
    if not key_id or not key_path:
        missing = "KALSHI_API_KEY_ID" if not key_id else "KALSHI_PRIVATE_KEY_PATH"
        raise BaselineConfigError(f"{missing} is not set: both credentials are needed to trade")
    if environ.get("KALSHI_ENVIRONMENT", "demo").strip() not in ("", "demo"):
        raise BaselineConfigError("KALSHI_ENVIRONMENT: the benchmark baseline trades demo only")
    count_text = environ.get("KALSHI_FIXED_ORDER_CONTRACT_COUNT", "").strip() or "1"
    if not count_text.isdigit() or int(count_text) < 1:
        raise BaselineConfigError(f"KALSHI_FIXED_ORDER_CONTRACT_COUNT={count_text!r}: want >= 1")
    ca_text = environ.get("KALSHI_CA_FILE", "").strip()
    return BaselineExchangeConfig(
        base_url=(environ.get("KALSHI_DEMO_BASE_URL", "").strip() or DEMO_BASE_URL).rstrip("/"),
        key_id=key_id,
        private_key_path=Path(key_path),
        ca_file=Path(ca_text) if ca_text else None,
        time_in_force=environ.get("KALSHI_ORDER_TIME_IN_FORCE", "").strip() or "fill_or_kill",
        self_trade_prevention_type=(
            environ.get("KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE", "").strip() or "taker_at_cross"
        ),
        contract_count=int(count_text),
    )


class TokenBucket:
    """The §5 bucket on the event loop's clock; waiters queue FIFO on an ``asyncio.Lock``."""

    def __init__(self) -> None:
        self._tokens = BUCKET_CAPACITY
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(
            BUCKET_CAPACITY, self._tokens + (now - self._updated) * BUCKET_REFILL_PER_S
        )
        self._updated = now

    async def acquire(self, tokens: float) -> None:
        """Take ``tokens``; an uncontended lock and a full bucket never yield the loop."""
        async with self._lock:
            self._refill()
            if self._tokens < tokens:
                await asyncio.sleep((tokens - self._tokens) / BUCKET_REFILL_PER_S)
                self._refill()
            self._tokens -= tokens


@dataclasses.dataclass
class FireCounters:
    """What the baseline's fires did, printed at exit."""

    fired: int = 0
    refused_price: int = 0
    dispatch_errors: int = 0
    last_error: str = ""


class BaselineFirePath:
    """One fire per accepted wake: build, sign, send (real) or stop at ``sent`` (shadow), rows.

    Args:
        session: the shared keep-alive session (``None`` only in tests that never fire real).
        config: the exchange configuration.
        signer: the account's signer.
        rows: the baseline's row writer.
        new_client_order_id: mints a 32-hex id (tests pin it).
    """

    def __init__(
        self,
        session: aiohttp.ClientSession | None,
        config: BaselineExchangeConfig,
        signer: KalshiSigner,
        rows: RowWriter,
        new_client_order_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self.counters = FireCounters()
        self._session = session
        self._config = config
        self._signer = signer
        self._rows = rows
        self._new_id = new_client_order_id
        self._bucket = TokenBucket()
        self._order_url = config.base_url + ORDER_PATH
        self._domain = clock_domain()

    async def fire(self, message: WakeMessage, arrival: tuple[int, int] | None = None) -> None:
        """Place (or shadow) one order for ``message``; record its stage rows whatever happens.

        ``arrival`` is ``(read_ns, acked_ns)`` from the connection loop, for the path breakdown.
        """
        fire_ns = time.perf_counter_ns()
        price = message.wire_price_yes_dollars
        if not message.dry_run and not 0.0 < price < 1.0:
            self.counters.refused_price += 1
            return
        self.counters.fired += 1
        path = FireStamps(fire_ns=fire_ns)
        if arrival is not None:
            path.read_ns, path.acked_ns = arrival
        build_start = path.decided_ns = time.perf_counter_ns()
        body = order_body(
            OrderSpec(
                ticker=message.market_ticker,
                client_order_id=self._new_id(),
                side="bid" if message.direction == "yes" else "ask",
                count=self._config.contract_count,
                price=f"{price:.4f}",
                time_in_force=self._config.time_in_force,
                self_trade_prevention_type=self._config.self_trade_prevention_type,
                exchange_index=message.exchange_index,
            )
        )
        build_end = time.perf_counter_ns()
        stamps = path.order
        path.build_start_ns, path.build_end_ns = build_start, build_end
        try:
            await self.place_order(body, stamps, dry_run=message.dry_run)
        except Exception as error:  # contained per fire, like the reference's fire task
            self.counters.dispatch_errors += 1
            self.counters.last_error = str(error)[:200]
        finally:
            self._record(message, path)

    async def place_order(self, body: bytes, stamps: OrderStamps, *, dry_run: bool) -> bytes:
        """DISPATCH.md §5's attempts; the response body (``b""`` for a shadow fire).

        Raises:
            OrderFailed: the last attempt failed, or a failure that is not retried.
        """
        while True:
            try:
                return await self._attempt(body, stamps, dry_run=dry_run)
            except OrderFailed as error:
                if stamps.attempts >= MAX_ATTEMPTS or not error.retryable:
                    raise
                delay = min(2.0, 0.25 * 2 ** (stamps.attempts - 1)) * (0.5 + random.random() / 2)
                await asyncio.sleep(delay)

    async def _attempt(self, body: bytes, stamps: OrderStamps, *, dry_run: bool) -> bytes:
        stamps.reset()
        stamps.attempts += 1
        if not dry_run:
            await self._bucket.acquire(TOKENS_PER_ORDER)
        timestamp = str(time.time_ns() // 1_000_000)
        stamps.sign_start_ns = time.perf_counter_ns()
        signature = self._signer.sign(timestamp, "POST", ORDER_PATH)
        stamps.sign_end_ns = time.perf_counter_ns()
        headers = signed_headers(self._config.key_id, timestamp, signature, with_body=True)
        stamps.sent_ns = time.perf_counter_ns()
        if dry_run:
            return b""
        if self._session is None:
            raise OrderFailed("no exchange session", retryable=False)
        token = _wire_stamps.set(stamps)
        try:
            async with self._session.post(
                self._order_url, data=body, headers=headers, timeout=ORDER_TIMEOUT
            ) as response:
                payload = await response.read()
                stamps.ack_ns = time.perf_counter_ns()
                status = response.status
        except TimeoutError:
            raise OrderFailed("order timed out", retryable=False) from None
        except aiohttp.ClientError as error:
            raise OrderFailed(f"connection error: {error!r}", retryable=True) from None
        finally:
            _wire_stamps.reset(token)
        if not 200 <= status < 300:
            text = f"{status}: {payload[:200].decode('utf-8', errors='replace')}"
            raise OrderFailed(text, retryable=status in RETRY_STATUSES)
        return payload

    def _record(self, message: WakeMessage, path: FireStamps) -> None:
        build_start, build_end, stamps = path.build_start_ns, path.build_end_ns, path.order
        spans = [
            ("order_build", build_start, build_end),
            ("sign", stamps.sign_start_ns, stamps.sign_end_ns),
            ("dispatch_send", stamps.sign_end_ns, stamps.sent_ns),
            ("dispatch_ack", stamps.sent_ns, stamps.ack_ns),
        ]
        comparable = message.is_clock_comparable_to(self._domain)
        if comparable:
            spans.append(("detect_fire", message.recv_ns, stamps.sent_ns))
        spans.append(("dispatch_wire", stamps.sent_ns, stamps.wire_ns))
        if comparable:
            spans.append(("detect_wire", message.recv_ns, stamps.wire_ns))
        # The reference's anchoring: every row ends at the moment it is recorded.
        ended_at_ms = time.time_ns() // 1_000_000
        for stage, start, end in spans:
            if start is None or end is None:
                continue
            metadata = METADATA[message.dry_run]
            if stage == "detect_wire":  # the same breakdown the Trio executor writes
                wire_path = {"dry_run": message.dry_run, "path_us": path_us(message, path)}
                metadata = json.dumps(wire_path, separators=(",", ":"))
            duration_ms = (end - start) / 1_000_000
            row = (message.correlation_id, stage, ended_at_ms - int(duration_ms), ended_at_ms)
            self._rows.record((*row, duration_ms, metadata))


def signed_headers(
    key_id: str, timestamp: str, signature: str, *, with_body: bool
) -> dict[str, str]:
    """The three Kalshi headers, plus the JSON content type for a request with a body."""
    headers = {HEADER_KEY: key_id, HEADER_TIMESTAMP: timestamp, HEADER_SIGNATURE: signature}
    if with_body:
        headers["Content-Type"] = "application/json"
    return headers


async def _prewarm(
    session: aiohttp.ClientSession, config: BaselineExchangeConfig, signer: KalshiSigner
) -> None:
    """One signed balance request: TCP and TLS handshakes happen before the first wake."""
    timestamp = str(time.time_ns() // 1_000_000)
    headers = signed_headers(
        config.key_id, timestamp, signer.sign(timestamp, "GET", BALANCE_PATH), with_body=False
    )
    async with session.get(
        config.base_url + BALANCE_PATH, headers=headers, timeout=READ_TIMEOUT
    ) as response:
        text = await response.read()
        if response.status != 200:
            raise BaselineConfigError(
                f"exchange pre-warm answered {response.status}: {text!r:.200}"
            )
        json.loads(text)


@contextlib.asynccontextmanager
async def open_fire_path(
    config: BaselineExchangeConfig,
    rows: RowWriter,
    new_client_order_id: Callable[[], str] = lambda: uuid.uuid4().hex,
) -> AsyncIterator[BaselineFirePath]:
    """Load the key, open and pre-warm the session; close it on exit.

    Raises:
        BaselineConfigError: an unusable key or CA file, or an exchange that refused the pre-warm.
    """
    try:
        signer = KalshiSigner(config.private_key_path, key_id=config.key_id)
        context = ssl.create_default_context(
            cafile=None if config.ca_file is None else str(config.ca_file)
        )
    except (ValueError, OSError, ssl.SSLError) as error:
        raise BaselineConfigError(str(error)) from None
    install_wire_stamp()
    connector = aiohttp.TCPConnector(ssl=context, limit=POOL_CONNECTIONS, keepalive_timeout=45.0)
    async with aiohttp.ClientSession(connector=connector) as session:
        try:
            await _prewarm(session, config, signer)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            raise BaselineConfigError(
                f"exchange {config.base_url}: pre-warm failed: {error!r}"
            ) from None
        yield BaselineFirePath(session, config, signer, rows, new_client_order_id)
