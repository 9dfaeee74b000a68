"""Assembling the order path of an executor with an exchange, and taking it down in order.

Two stages, so that everything about the exchange that can fail is found before the database
exists (a refused start leaves no file behind):

- :func:`open_exchange_side`, entered by the server after the socket is claimed and before the
  database is opened, left last. It owns the in-process fake exchange (``--exchange fake``), the
  endpoint and its key, the exchange client (the order connections, TLS-handshaken and kept warm
  by a task of their own, and one keep-alive httpx client for everything else, CA file loaded,
  pre-warmed with one signed balance request: the exchange is reachable and accepts the key), the
  signing-ahead worker (``--presign-max-age-ms``; its first signature ready before the socket is
  bound, stopped before the worker) and the shadow-signing worker.
- :func:`open_order_path`, entered after telemetry is open (and the database proven writable)
  and before the socket is published, left after the fires nursery is done, before telemetry
  closes. In order: reconciliation of the rows earlier runs left unresolved
  (``executor.exchange.reconcile``; the corrections committed first), the risk gate's warm start
  from the corrected ``orders_fired`` (a worker thread), the shadow lane (closed and drained at
  exit) and the pollers (the account poll, first poll before serving, later polls also following
  resting orders; and the heartbeat).

Every start-up failure is one :class:`StartupError` line. Exit order: pollers cancelled, shadow
lane drained, telemetry closed by the server, then the client, the signing worker and the fake
exchange, so in-flight orders have finished (and queued their resolution rows) before the client
goes, and the rows are all queued before the server closes telemetry.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog
import trio

from executor.clock import clock_domain, wall_ms
from executor.config import ConfigError, StartupError
from executor.decide.killswitch import KillSwitch
from executor.decide.recent_orders import load_recent_orders
from executor.decide.risk import RiskGate
from executor.decide.risk_limits import DAY_MS
from executor.exchange.account import (
    HEARTBEAT_INTERVAL_S,
    AccountState,
    serve_account,
    serve_heartbeats,
)
from executor.exchange.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.order_pool import MAX_ORDER_CONNECTIONS, ORDER_CONNECTIONS
from executor.exchange.presign import SignaturePool
from executor.exchange.reconcile import CollectedRows, Reconciler
from executor.exchange.shadow_lane import ShadowLane
from executor.exchange.sign_worker import open_process_signer
from executor.exchange.stages import PerfToWall
from executor.exchange.transport import ExchangeClient, ExchangeEndpoint, open_exchange
from executor.fake.exchange import FakeCredentials, serve_fake_exchange
from executor.fire.path import FirePath, OrderPath
from executor.recording.open_orders import load_open_orders, write_corrections
from executor.settings import ExchangeSettings, Settings
from executor.signer import KalshiSigner, SignerKeyError
from executor.telemetry import Telemetry, row_fields

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


class OrderPathFactory:
    """What the server is given: the two stages of the order path, in the order it enters them.

    ``exchange_side()`` first (before the database is opened), then ``factory(telemetry)`` (after);
    called alone, ``factory(telemetry)`` opens the exchange side itself.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        telemetry_db: Path,
        kill_switch: KillSwitch | None,
        signer: KalshiSigner | None = None,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.telemetry_db = telemetry_db
        self.kill_switch = kill_switch
        self.signer = signer
        self.announce = announce
        self.heartbeat_interval_s = HEARTBEAT_INTERVAL_S
        """Seconds between heartbeat rows (a test shortens it: a heartbeat that is written is
        what ends an audit-trail outage)."""
        self._side: ExchangeSide | None = None

    @asynccontextmanager
    async def exchange_side(self) -> AsyncIterator[ExchangeSide]:
        """Stage one (:func:`open_exchange_side`), kept for the second stage to use."""
        async with open_exchange_side(
            self.settings, signer=self.signer, announce=self.announce
        ) as side:
            self._side = side
            try:
                yield side
            finally:
                self._side = None

    def __call__(self, telemetry: Telemetry) -> AbstractAsyncContextManager[FirePath]:
        """Stage two (:func:`open_order_path`) over the exchange side, if one is open."""
        return open_order_path(
            self.settings,
            telemetry,
            telemetry_db=self.telemetry_db,
            kill_switch=self.kill_switch,
            signer=self.signer,
            announce=self.announce,
            side=self._side,
            heartbeat_interval_s=self.heartbeat_interval_s,
        )


def order_path_factory(
    settings: Settings,
    *,
    telemetry_db: Path,
    kill_switch: KillSwitch | None,
    signer: KalshiSigner | None = None,
    announce: Callable[[str], None] | None = None,
) -> OrderPathFactory:
    """The server's factory for ``settings`` (mode fake or real)."""
    return OrderPathFactory(
        settings,
        telemetry_db=telemetry_db,
        kill_switch=kill_switch,
        signer=signer,
        announce=announce,
    )


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
    step = announce or _silent
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


@asynccontextmanager
async def open_order_path(
    settings: Settings,
    telemetry: Telemetry,
    *,
    telemetry_db: Path,
    kill_switch: KillSwitch | None,
    signer: KalshiSigner | None = None,
    announce: Callable[[str], None] | None = None,
    side: ExchangeSide | None = None,
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
) -> AsyncIterator[FirePath]:
    """Start everything real fires need and yield the fire path; take it down in order on exit.

    ``side`` is the exchange end opened before the database; None opens one here (first).
    ``announce``, when given, is told each start-up step as it begins, in words (the service
    manager's ``STATUS=`` line, ``executor.notify``).

    Raises:
        StartupError: before yielding, when the key, the exchange or the fake cannot be set up.

    Cancellation: on exit the shadow lane finishes the jobs it holds (no network I/O); an
    exchange side opened here is closed after it.
    """
    step = announce or _silent
    async with AsyncExitStack() as stack:
        if side is None:
            side = await stack.enter_async_context(
                open_exchange_side(settings, signer=signer, announce=announce)
            )
        client = side.client
        reconciler = Reconciler(client, telemetry)
        step("reconciling the orders earlier runs left unresolved")
        await _reconcile_earlier_runs(reconciler, telemetry_db)
        step("warm-starting the risk gate from orders_fired")
        risk = await _warm_risk_gate(settings, telemetry_db)
        reconciler.fills = risk
        fire_path = _fire_path(settings, telemetry, kill_switch, client, risk, reconciler)
        orders = fire_path.orders
        assert orders is not None
        async with trio.open_nursery() as lane_nursery:
            await lane_nursery.start(orders.lane.run)
            try:
                async with trio.open_nursery() as pollers:
                    step("polling the account (balance, positions)")
                    await pollers.start(
                        functools.partial(serve_account, follow_resting=reconciler.poll_resting),
                        client,
                        orders.account,
                        risk,
                    )
                    await pollers.start(
                        functools.partial(
                            serve_heartbeats,
                            telemetry,
                            lambda: telemetry.statistics().queued,
                            lambda: _dropped_rows(telemetry),
                            interval_s=heartbeat_interval_s,
                        )
                    )
                    try:
                        yield fire_path
                    finally:
                        pollers.cancel_scope.cancel()
            finally:
                orders.lane.close()


def _silent(_step: str) -> None:
    """An ``announce`` that tells nobody."""


def order_connections(settings: Settings) -> int:
    """Order connections to keep: one per order the risk gate lets be in flight, plus one, at
    least ``ORDER_CONNECTIONS`` and at most ``MAX_ORDER_CONNECTIONS`` (a higher limit opens the
    rest on demand)."""
    in_flight = settings.risk_limits.max_concurrent_dispatches if settings.risk_enabled else 1
    return min(MAX_ORDER_CONNECTIONS, max(ORDER_CONNECTIONS, in_flight + 1))


async def _start_presigning(
    endpoint: ExchangeEndpoint, max_age_ms: int, services: trio.Nursery, stack: AsyncExitStack
) -> SignaturePool:
    """A signature pool kept full by its own worker process, stopped before the worker is."""
    signer = await stack.enter_async_context(
        open_process_signer(endpoint.signer.private_key_path, endpoint.key_id)
    )
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


def _fire_path(
    settings: Settings,
    telemetry: Telemetry,
    kill_switch: KillSwitch | None,
    client: ExchangeClient,
    risk: RiskGate | None,
    reconciler: Reconciler,
) -> FirePath:
    exchange = settings.exchange
    policy = OrderPolicy(
        time_in_force=exchange.time_in_force,
        self_trade_prevention_type=exchange.self_trade_prevention_type,
        # The production guard is about the real exchange; the fake is never production.
        environment=exchange.environment if exchange.mode == "real" else "demo",
        allow_production=exchange.allow_production,
    )
    orders = OrderPath(
        dispatcher=OrderDispatcher(client, telemetry, policy, reconciler),
        sink=telemetry,
        lane=ShadowLane(client, presigned=client.place_shadow_now),
        sizing=settings.sizing,
        risk=risk,
        account=AccountState(),
        clock=PerfToWall(),
        clock_domain=clock_domain(),
        audit=telemetry,
    )
    return FirePath(
        kill_switch=kill_switch,
        contract_count=settings.sizing.fixed_contract_count,
        orders=orders,
    )


async def _endpoint(
    exchange: ExchangeSettings,
    services: trio.Nursery,
    stack: AsyncExitStack,
    signer: KalshiSigner | None,
) -> ExchangeEndpoint:
    """The endpoint to trade against; for ``fake``, after starting the fake exchange."""
    if exchange.mode == "fake":
        directory = Path(tempfile.mkdtemp(prefix="executor-fake-"))  # 0700: private
        stack.callback(shutil.rmtree, directory, True)
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


async def _reconcile_earlier_runs(reconciler: Reconciler, telemetry_db: Path) -> None:
    """Resolve the rows earlier runs left unresolved, committed before the warm start reads.

    Blocking reads and the one commit run in worker threads. A correction that cannot be
    committed is logged with its row; the row keeps its marker for the next start-up.
    """
    since_ms = wall_ms() - DAY_MS  # the warm start's window
    rows = await trio.to_thread.run_sync(load_open_orders, telemetry_db, since_ms)
    collected = CollectedRows()
    await reconciler.reconcile_at_startup(rows, sink=collected)
    if not collected.rows:
        return
    outcome = await trio.to_thread.run_sync(write_corrections, telemetry_db, collected.rows)
    for row, error in outcome.order_failures:
        log.error("start-up correction not written", row=row_fields(row), error=error)


async def _warm_risk_gate(settings: Settings, telemetry_db: Path) -> RiskGate | None:
    """The risk gate, warm-started from the last 24 h of ``orders_fired`` (None when disabled)."""
    if not settings.risk_enabled:
        log.warning("risk gate disabled (KALSHI_RISK_GATE_ENABLED)")
        return None
    allowed = settings.allowed_exchange_indexes
    gate = RiskGate(settings.risk_limits, allowed)
    past = await trio.to_thread.run_sync(load_recent_orders, telemetry_db, wall_ms())
    gate.warm_start(past)
    log.info("risk gate warm", past_orders=len(past), allowed_exchange_indexes=sorted(allowed))
    return gate


def _dropped_rows(telemetry: Telemetry) -> int:
    """Every telemetry row dropped so far, whatever the reason (the heartbeat's figure)."""
    stats = telemetry.statistics()
    return (
        stats.dropped_ring_full
        + stats.dropped_oversized_id
        + stats.dropped_write_failed
        + int(getattr(stats, "order_rows_dropped", 0))
    )
