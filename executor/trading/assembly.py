"""Assembling the order path of an executor with an exchange, and taking it down in order.

Two stages, so that everything about the exchange that can fail is found before the database
exists (a refused start leaves no file behind):

- stage one, :func:`~executor.trading.exchange_side.open_exchange_side` (``executor.fire.
  exchange_side``): the fake exchange if asked, the key, the pre-warmed client and the signing
  workers, entered by the server after the socket is claimed and before the database is opened,
  left last.
- stage two, :func:`open_order_path`, entered after telemetry is open (and the database proven
  writable) and before the socket is published, left after the fires nursery is done, before
  telemetry closes. In order: this installation's ``client_order_id`` prefix
  (``executor.recording.orders.installation``), adoption of the orders the exchange has from it with
  no row (``executor.exchange.follow.adoption``; committed first), reconciliation of the rows
  earlier runs left open, from as far back as the exchange lists orders
  (``executor.exchange.follow.reconcile``; the corrections committed next; the intent journal's rows
  were replayed when telemetry opened), the risk gate's warm start from the corrected
  ``orders_fired`` (a worker thread), the shadow lane (closed and drained at exit) and the pollers
  (the account poll, first poll before serving, later polls also following every open order, only
  those of unknown outcome while the exchange's stream is trusted; the heartbeat; the stream,
  ``executor.exchange.stream.client``, unless ``--stream off``; the book guard,
  ``executor.exchange.book.guard``, which carries a kill-switch engage or an audit outage to the
  exchange's book, after this installation's order group is found or created and recorded in the
  database, ``executor.exchange.book.run_group``; the exchange's status,
  ``executor.exchange.status``, read before serving; later adoption passes, also after every audit
  outage).

``executor.trading.factory.OrderPathFactory`` is what the server is given: the two stages, in the
order it enters them. Every start-up failure is one :class:`~executor.config.variables.StartupError`
line. Exit order: pollers cancelled, shadow lane drained, telemetry closed by the server, then the
client, the signing worker and the fake exchange, so in-flight orders have finished (and queued
their resolution rows) before the client goes, and the rows are all queued before the server closes
telemetry.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import structlog
import trio

from executor.clock import clock_domain, wall_ms
from executor.config.coherence import limits_summary, sizing_conflict
from executor.config.settings import Settings
from executor.decide.decision import KillSwitchState
from executor.decide.risk import RiskGate
from executor.exchange.book.guard import BookGuard, book_guard
from executor.exchange.book.run_group import open_run_group
from executor.exchange.follow.account import AccountState, serve_account
from executor.exchange.follow.adoption import Adopter, adopt_at_startup, take_adopted
from executor.exchange.follow.ledger_keeper import LedgerKeeper
from executor.exchange.follow.observation import Source
from executor.exchange.follow.reconcile import CollectedRows, Reconciler
from executor.exchange.halts import ExchangeHalts
from executor.exchange.orders.dispatcher import OrderDispatcher, OrderPolicy
from executor.exchange.orders.shadow_lane import ShadowLane
from executor.exchange.orders.stages import PerfToWall
from executor.exchange.orders.transport import ExchangeClient
from executor.exchange.rest import tls_context
from executor.exchange.status import StatusWatch
from executor.exchange.stream.client import (
    StreamEndpoint,
    poll_unless_streaming,
    serve_stream,
    stream_url_of,
)
from executor.exchange.stream.orders import StreamedOrders, StreamFeed
from executor.exchange.stream.state import StreamState
from executor.fire.path import FirePath, OrderPath
from executor.recording.heartbeat import (
    HEARTBEAT_INTERVAL_S,
    HEARTBEAT_PROCESS,
    serve_heartbeats,
)
from executor.recording.orders.installation import ClientOrderIds, load_installation
from executor.recording.orders.open_orders import (
    LIVE_WINDOW_MS,
    load_open_orders,
    write_corrections,
)
from executor.recording.orders.recent_orders import load_recent_orders
from executor.runtime.signals import serve_group_resets
from executor.signer import KalshiSigner
from executor.telemetry import Telemetry, row_fields
from executor.trading.counters import order_path_counters
from executor.trading.exchange_side import ExchangeSide, open_exchange_side, silent

log = structlog.get_logger()


@asynccontextmanager
async def open_order_path(
    settings: Settings,
    telemetry: Telemetry,
    *,
    telemetry_db: Path,
    kill_switch: KillSwitchState | None,
    signer: KalshiSigner | None = None,
    announce: Callable[[str], None] | None = None,
    side: ExchangeSide | None = None,
    heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
    heartbeat_process: str = HEARTBEAT_PROCESS,
) -> AsyncIterator[FirePath]:
    """Start everything real fires need and yield the fire path; take it down in order on exit.

    ``side`` is the exchange end opened before the database; None opens one here (first).
    ``announce``, when given, is told each start-up step as it begins, in words (the service
    manager's ``STATUS=`` line, ``executor.runtime.notify``).

    Raises:
        StartupError: before yielding, when the key, the exchange or the fake cannot be set up.

    Cancellation: on exit the shadow lane finishes the jobs it holds (no network I/O); an
    exchange side opened here is closed after it.
    """
    step = announce or silent
    async with AsyncExitStack() as stack:
        if side is None:
            side = await stack.enter_async_context(
                open_exchange_side(settings, signer=signer, announce=announce)
            )
        client = side.client
        run_started_ms = wall_ms()
        installation = await trio.to_thread.run_sync(
            load_installation, telemetry_db, run_started_ms
        )
        journal = telemetry.journal
        adopter = Adopter(
            client,
            installation.ids,
            telemetry_db,
            time_in_force=settings.exchange.time_in_force,
            self_trade_prevention_type=settings.exchange.self_trade_prevention_type,
            run_started_ms=run_started_ms,
            adopt_since_ms=installation.adopt_since_ms,
            in_flight=journal.outstanding if journal is not None else frozenset,
        )
        if not installation.created:  # a new prefix cannot be on the exchange yet
            step("adopting the exchange's orders of this installation that have no row")
            await adopt_at_startup(adopter, telemetry_db)
        # Wired one way: the gate (warmed below), the ledger's keeper telling it of fills, the
        # stream's feed, then the reconciler over them and the stream over the reconciler.
        risk = _risk_gate(settings)
        keeper = LedgerKeeper(telemetry, fills=risk)
        feed = StreamFeed() if settings.exchange.stream else None
        reconciler = Reconciler(client, telemetry, keeper=keeper, feed=feed)
        step("reconciling the orders earlier runs left unresolved")
        await _reconcile_earlier_runs(reconciler, telemetry_db)
        step("warm-starting the risk gate from orders_fired")
        await _warm_risk_gate(risk, settings, telemetry_db)
        stream = None if feed is None else StreamedOrders(reconciler, telemetry, feed=feed)
        step("finding or creating this installation's order group")
        status_watch = StatusWatch()
        group, halts = await open_run_group(
            settings.exchange, client.rest, side.endpoint.base_url, telemetry_db, status_watch.want
        )
        writer = client.rest
        cancels = keeper.source(Source.CANCEL)
        guard = book_guard(
            settings.exchange, writer, reconciler, cancels, group, kill_switch, telemetry, halts
        )
        account = AccountState()
        stream_state = StreamState()
        counters = order_path_counters(
            client,
            reconciler,
            guard,
            adopter,
            None if stream is None else (stream, stream_state),
            halts,
        )
        fire_path = _fire_path(
            settings,
            telemetry,
            kill_switch,
            client,
            risk,
            reconciler,
            guard,
            ids=installation.ids,
            account=account,
            counters=counters,
            halts=halts,
        )
        orders = fire_path.orders
        assert orders is not None

        telemetry.audit_trail.on_change(adopter.hear_audit)
        telemetry.audit_trail.on_change(guard.hear_audit)
        async with trio.open_nursery() as lane_nursery:
            await lane_nursery.start(orders.lane.run)
            try:
                async with trio.open_nursery() as pollers:
                    # First: `executor group reset` signals a process only once it beats.
                    await pollers.start(serve_group_resets, halts.operator_reset)
                    step("reading the exchange's status (a trading or exchange pause)")
                    await pollers.start(status_watch.run, writer, halts)
                    step("polling the account (balance, positions)")
                    follow_resting = poll_unless_streaming(stream, reconciler)
                    await pollers.start(
                        functools.partial(serve_account, follow_resting=follow_resting),
                        client,
                        account,
                        risk,
                    )
                    _warn_of_sizing_conflict(settings, orders.account.balance_dollars)
                    await pollers.start(
                        functools.partial(
                            serve_heartbeats,
                            telemetry,
                            lambda: telemetry.statistics().queued,
                            lambda: _dropped_rows(telemetry),
                            interval_s=heartbeat_interval_s,
                            process=heartbeat_process,
                            lookups_unknown=lambda: reconciler.lookups_unknown,
                        )
                    )
                    if stream is not None:
                        step("connecting the exchange's stream (fills, order updates)")
                        endpoint = await _stream_endpoint(settings, side)
                        await pollers.start(
                            functools.partial(serve_stream, halts=halts),
                            endpoint,
                            stream,
                            stream_state,
                        )
                    await pollers.start(guard.run)
                    await pollers.start(
                        adopter.serve, telemetry, functools.partial(take_adopted, keeper, risk)
                    )
                    try:
                        yield fire_path
                    finally:
                        if settings.exchange.book.cancel_resting_on_exit:
                            await guard.cancel_at_exit()
                        pollers.cancel_scope.cancel()
            finally:
                orders.lane.close()


def _warn_of_sizing_conflict(settings: Settings, balance_dollars: float) -> None:
    """One warning at start-up when the risk gate will refuse typical orders as sized."""
    problem = sizing_conflict(
        settings.sizing,
        settings.risk_limits,
        balance_dollars,
        risk_enabled=settings.risk_enabled,
    )
    if problem is not None:
        log.warning("sizing and the risk gate disagree", problem=problem)


def _fire_path(
    settings: Settings,
    telemetry: Telemetry,
    kill_switch: KillSwitchState | None,
    client: ExchangeClient,
    risk: RiskGate | None,
    reconciler: Reconciler,
    guard: BookGuard,
    *,
    ids: ClientOrderIds,
    account: AccountState,
    counters: Callable[[], dict[str, int]],
    halts: ExchangeHalts | None = None,
) -> FirePath:
    exchange = settings.exchange
    policy = OrderPolicy(
        time_in_force=exchange.time_in_force,
        self_trade_prevention_type=exchange.self_trade_prevention_type,
        # The production guard is about the real exchange; the fake is never production.
        environment=exchange.environment if exchange.mode == "real" else "demo",
        allow_production=exchange.allow_production,
        cancel_order_on_pause=exchange.book.cancel_order_on_pause,
        order_group_id=None if guard.group is None else guard.group.order_group_id,
    )
    orders = OrderPath(
        dispatcher=OrderDispatcher(client, telemetry, policy, reconciler, ids),
        sink=telemetry,
        lane=ShadowLane(client, presigned=client.place_shadow_now),
        sizing=settings.sizing,
        risk=risk,
        account=account,
        clock=PerfToWall(),
        clock_domain=clock_domain(),
        audit=telemetry,
        book=guard,
        counters=counters,
        halts=halts,
    )
    return FirePath(
        kill_switch=kill_switch,
        contract_count=settings.sizing.fixed_contract_count,
        orders=orders,
    )


async def _stream_endpoint(settings: Settings, side: ExchangeSide) -> StreamEndpoint:
    """The stream's URL (the configured one, else on the REST host) and the side's key and CA."""
    endpoint = side.endpoint
    context = await trio.to_thread.run_sync(tls_context, endpoint.ca_file)
    url = settings.exchange.stream_url or stream_url_of(endpoint.base_url)
    return StreamEndpoint(url, endpoint.key_id, endpoint.signer.sign, context)


async def _reconcile_earlier_runs(reconciler: Reconciler, telemetry_db: Path) -> None:
    """Resolve the rows earlier runs left unresolved, committed before the warm start reads.

    Blocking reads and the one commit run in worker threads. A correction that cannot be
    committed is logged with its row; the row keeps its marker for the next start-up.
    """
    since_ms = wall_ms() - LIVE_WINDOW_MS  # as far back as the exchange's listing covers
    rows = await trio.to_thread.run_sync(load_open_orders, telemetry_db, since_ms)
    collected = CollectedRows()
    await reconciler.reconcile_at_startup(rows, sink=collected)
    if not collected.rows:
        return
    outcome = await trio.to_thread.run_sync(write_corrections, telemetry_db, collected.rows)
    for row, error in outcome.order_failures:
        log.error("start-up correction not written", row=row_fields(row), error=error)


def _risk_gate(settings: Settings) -> RiskGate | None:
    """The risk gate, cold (None when disabled): :func:`_warm_risk_gate` warms it once start-up
    has corrected the table."""
    if not settings.risk_enabled:
        log.warning("risk gate disabled (KALSHI_RISK_GATE_ENABLED)")
        return None
    return RiskGate(settings.risk_limits, settings.allowed_exchange_indexes)


async def _warm_risk_gate(gate: RiskGate | None, settings: Settings, telemetry_db: Path) -> None:
    """Warm-start ``gate`` from the last 24 h of ``orders_fired``."""
    if gate is None:
        return
    past = await trio.to_thread.run_sync(load_recent_orders, telemetry_db, wall_ms())
    gate.warm_start(past)
    fills = sum(order.fill_count for order in past)  # what the gate holds as filled
    log.info(
        "risk gate warm",
        past_orders=len(past),
        fills=fills,
        allowed_exchange_indexes=sorted(settings.allowed_exchange_indexes),
        limits=limits_summary(settings.risk_limits),
    )


def _dropped_rows(telemetry: Telemetry) -> int:
    """Every telemetry row dropped so far, whatever the reason (the heartbeat's figure)."""
    stats = telemetry.statistics()
    return (
        stats.dropped_ring_full
        + stats.dropped_oversized_id
        + stats.dropped_write_failed
        + int(getattr(stats, "order_rows_dropped", 0))
    )
