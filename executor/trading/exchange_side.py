"""Stage one of the order path: the exchange side, ready before the database exists.

:func:`open_exchange_side` is entered by the server after the socket is claimed and before the
database is opened, and left last (``executor.trading.assembly`` holds stage two and the order in
which the server enters both). It owns the in-process fake exchange (``--exchange fake``), the
endpoint and its key, the exchange client (the order connections, TLS-handshaken and kept warm by a
task of their own, and one keep-alive httpx client for everything else, CA file loaded, pre-warmed
with one signed balance request: the exchange is reachable and accepts the key), the signing-ahead
worker (``--presign-max-age-ms``; its first signature ready before the socket is bound, stopped
before the worker) and the shadow-signing worker; and, once the client is up, the account's rate
limits (``GET /account/limits``, ``/account/endpoint_costs``). The order group is stage two's
(``executor.exchange.book.run_group``): it is made or reused only past every local check.
Everything about the exchange that can fail is found here, so a refused start leaves no database
behind; every failure is one :class:`~executor.config.variables.StartupError` line.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Final

import structlog
import trio
import trio_parallel  # type: ignore[import-untyped]  # ships no type information

from executor.config.settings import ExchangeSettings, Settings
from executor.config.variables import ConfigError, StartupError
from executor.exchange.orders.pool import MAX_ORDER_CONNECTIONS, ORDER_CONNECTIONS
from executor.exchange.orders.presign import SignaturePool
from executor.exchange.orders.sign_worker import one_line, open_process_signer
from executor.exchange.orders.transport import ExchangeClient, ExchangeEndpoint, open_exchange
from executor.exchange.rate_limits import fetch_api_limits
from executor.fake.exchange import FakeCredentials, serve_fake_exchange
from executor.fake.scratch import IN_PROCESS_PREFIX, scratch_folder
from executor.signer import KalshiSigner, SignerKeyError

log = structlog.get_logger()

IN_PROCESS_FAKE_BALANCE_CENTS: Final = 10_000
"""The in-process fake's starting balance (cents): $100, not the fake's usual $1,000. With the
reference's default sizing (2% of the balance per order) and position limit (5 contracts per
ticker), $1,000 sizes a typical wake (edge 0.06 at 0.56) to 35 contracts and the risk gate refuses
every one; $100 sizes it to 3, so ``--exchange fake`` shows orders filling out of the box."""


def load_signer(exchange: ExchangeSettings) -> KalshiSigner:
    """Load the private key of a real exchange once, at start-up.

    Raises:
        ConfigError: no key path is configured, or the key cannot be used (missing, unreadable,
            malformed: a configuration mistake, like a missing key file).
    """
    if exchange.private_key_path is None:
        raise ConfigError("no private key configured (KALSHI_PRIVATE_KEY_PATH)")
    try:
        return KalshiSigner(exchange.private_key_path, exchange.key_id)
    except SignerKeyError as error:
        raise ConfigError(str(error)) from None


@dataclass(frozen=True, slots=True)
class ExchangeSide:
    """The exchange end of the order path, ready before the database exists."""

    endpoint: ExchangeEndpoint
    client: ExchangeClient


@asynccontextmanager
async def open_exchange_side(
    settings: Settings,
    *,
    signer: KalshiSigner | None = None,
    announce: Callable[[str], None] | None = None,
) -> AsyncIterator[ExchangeSide]:
    """Start the exchange end: the fake (if any), the key, the pre-warmed client, the signing
    worker. Touches no database.

    Raises:
        StartupError: the key, the CA file, the exchange or the fake cannot be set up.

    Cancellation: on exit the client is closed, then the signing worker, then the fake.
    """
    exchange = settings.exchange
    step = announce or silent
    async with trio.open_nursery() as services:
        try:
            async with AsyncExitStack() as stack:
                if exchange.mode == "fake":
                    step("starting the in-process fake exchange")
                endpoint = await _endpoint(exchange, services, stack, signer)
                step(f"pre-warming the exchange client ({endpoint.base_url})")
                try:
                    client = await stack.enter_async_context(
                        open_exchange(
                            endpoint,
                            nursery=services,
                            order_connections=order_connections(settings),
                        )
                    )
                except Exception as error:
                    raise StartupError(
                        f"exchange {endpoint.base_url} cannot be reached: "
                        f"{str(error) or type(error).__name__}"
                    ) from None
                step("reading the account's rate limits")
                client.use_limits(await fetch_api_limits(client))
                if exchange.presign_max_age_ms > 0:
                    step("starting the signing-ahead worker process")
                    client.signatures = await _start_presigning(
                        endpoint, exchange.presign_max_age_ms, services, stack
                    )
                if exchange.shadow_signing == "process":
                    step("starting the shadow signing worker process")
                    process_signer = await stack.enter_async_context(
                        open_process_signer(
                            endpoint.signer.private_key_path,
                            endpoint.key_id,
                            fallback=endpoint.signer.sign,
                        )
                    )
                    client.shadow_signer = process_signer.sign
                    if not process_signer.on_loop:  # else its warning said where they sign
                        log.info("shadow fires sign in a worker process")
                yield ExchangeSide(endpoint, client)
        finally:
            # After the client has closed: the fake exchange (if any) goes last.
            services.cancel_scope.cancel()


def silent(_step: str) -> None:
    """An ``announce`` that tells nobody."""


def order_connections(settings: Settings) -> int:
    """Order connections to keep: one per order the risk gate lets be in flight, plus one, at
    least ``ORDER_CONNECTIONS`` and at most ``MAX_ORDER_CONNECTIONS`` (a higher limit opens the
    rest on demand)."""
    in_flight = settings.risk_limits.max_concurrent_dispatches if settings.risk_enabled else 1
    return min(MAX_ORDER_CONNECTIONS, max(ORDER_CONNECTIONS, in_flight + 1))


async def _start_presigning(
    endpoint: ExchangeEndpoint, max_age_ms: int, services: trio.Nursery, stack: AsyncExitStack
) -> SignaturePool | None:
    """A signature pool kept full by its own worker process, stopped before the worker is; None
    (one warning line) when the worker cannot start: every order then signs inline."""
    try:
        signer = await stack.enter_async_context(
            open_process_signer(endpoint.signer.private_key_path, endpoint.key_id)
        )
    except trio_parallel.BrokenWorkerError as error:
        log.warning(
            "signing-ahead worker could not start: orders sign inline on the loop",
            error=one_line(error),
        )
        return None
    pool = SignaturePool(signer.sign, max_age_ms=max_age_ms)
    scope = trio.CancelScope()
    stopped = trio.Event()

    async def keep_filled(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with scope:
                await pool.run(task_status=task_status)
        finally:
            stopped.set()

    async def stop() -> None:
        scope.cancel()
        with trio.CancelScope(shield=True):
            await stopped.wait()

    await services.start(keep_filled)
    stack.push_async_callback(stop)  # runs before the worker's context closes (LIFO)
    log.info("orders sign ahead in a worker process", max_age_ms=max_age_ms, size=pool.size)
    return pool


async def _endpoint(
    exchange: ExchangeSettings,
    services: trio.Nursery,
    stack: AsyncExitStack,
    signer: KalshiSigner | None,
) -> ExchangeEndpoint:
    """The endpoint to trade against; for ``fake``, after starting the fake exchange."""
    if exchange.mode == "fake":
        # 0700, removed at exit; one a SIGKILL left behind is removed by the next such start.
        folder = scratch_folder(IN_PROCESS_PREFIX)
        directory = await trio.to_thread.run_sync(folder.__enter__)
        stack.push_async_callback(trio.to_thread.run_sync, folder.__exit__, None, None, None)
        credentials = await trio.to_thread.run_sync(FakeCredentials.generate, directory)
        fake = await services.start(
            functools.partial(
                serve_fake_exchange, credentials, balance_cents=IN_PROCESS_FAKE_BALANCE_CENTS
            )
        )
        fake_signer = await trio.to_thread.run_sync(
            KalshiSigner, credentials.private_key_path, credentials.key_id
        )
        log.warning(
            "FAKE exchange: orders go to an in-process fake, nothing reaches Kalshi",
            url=fake.base_url,
        )
        return ExchangeEndpoint(fake.base_url, credentials.key_id, fake_signer, credentials.ca_file)
    if exchange.base_url is None:
        raise StartupError("no exchange base URL configured")
    if signer is None:
        signer = await trio.to_thread.run_sync(load_signer, exchange)
    log.warning(
        "trading against a real exchange",
        environment=exchange.environment,
        base_url=exchange.base_url,
    )
    return ExchangeEndpoint(exchange.base_url, exchange.key_id, signer, exchange.ca_file)
