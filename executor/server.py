"""The executor service: one root nursery, the connection loop, fires, and orderly shutdown.

Task tree (every task lives inside ``ExecutorServer.run``'s root nursery)::

    root
    |-- telemetry consumer          started first: the database is open before any row exists
    |-- signals                     SIGINT/SIGTERM -> shutdown; a second one cuts the grace short
    `-- service
        |-- fires nursery           one task per accepted fire (and keep-warm's, when on)
        `-- connections nursery     one task per connection, fed by serve_listeners

Each connection's life is ``executor.wire.session``; its frame loop (read, stamp, decode, ack,
record, fire) is ``executor.wire.connection``; the signals task is ``executor.runtime.signals``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import structlog
import trio

from executor import logs
from executor.config.variables import StartupError
from executor.fire.keep_warm import KeepWarm
from executor.fire.path import FireOutcome, FirePath, FireRest
from executor.recording.counting.counters import ServerStatistics
from executor.recording.counting.metrics import (
    STOP_TIMEOUT_S,
    MetricsEndpoint,
    MetricsSetupError,
    start_metrics_endpoint,
)
from executor.runtime.gc_settings import GcMode, settle_heap
from executor.runtime.notify import ServiceNotifier
from executor.runtime.signals import ShutdownSignals
from executor.runtime.thread_priority import WriterPriority
from executor.telemetry import (
    BATCH_LINGER_S,
    CHANNEL_CAPACITY,
    Telemetry,
    TelemetryOpenError,
    serve_telemetry,
)
from executor.wire.connection import Connection, FrameCounters
from executor.wire.protocol import WakeMessage
from executor.wire.session import serve_connection
from executor.wire.socket_access import SocketAccess, group_reach_problem
from executor.wire.unixsocket import (
    InstanceLock,
    PreparedSocket,
    SocketSetupError,
    check_socket_apart,
    check_socket_path,
    prepare_unix_socket,
    publish_unix_socket,
    remove_socket_file,
    remove_stale_socket,
)

if TYPE_CHECKING:  # the order path's modules load only when an exchange is configured
    from executor.trading.factory import OrderPathFactory

log = structlog.get_logger()

DEFAULT_GRACE_S: Final = 5.0
"""How long in-flight frames and fires may run after a shutdown signal (seconds)."""


@dataclass
class _Counters:
    frames: FrameCounters = field(default_factory=FrameCounters)
    fires_cancelled: int = 0
    fire_errors: int = 0
    connections_opened: int = 0
    connections_open: int = 0


@dataclass
class ServerConfig:
    """Everything ``executor serve`` is told on its command line."""

    socket_path: Path
    telemetry_db: Path
    fire_path: FirePath = field(default_factory=FirePath)
    grace_s: float = DEFAULT_GRACE_S
    telemetry_capacity: int = CHANNEL_CAPACITY
    telemetry_linger_s: float = BATCH_LINGER_S
    writer_priority: WriterPriority = "yield"
    """``--writer-priority``: how the telemetry writer thread leaves the loop its CPU."""
    read_between_batches: bool = False
    """``--read-between-batches``: read between batches even when the telemetry writer is behind."""
    frame_spans: bool = False
    """``--frame-spans``: a ``wake_frame`` row per frame beside ``wake_recv`` (its own work)."""
    handle_signals: bool = True
    order_path: OrderPathFactory | None = None
    """Builds the exchange fire path once telemetry is open (replaces ``fire_path``); None means
    no exchange: fires are decided and counted, nothing is sent."""
    metrics_address: tuple[str, int] | None = None
    """``(host, port)`` of the Prometheus endpoint (``--metrics``); None serves none."""
    notifier: ServiceNotifier | None = None
    """Where readiness goes (systemd's ``NOTIFY_SOCKET``): STATUS= while starting, READY=1 once
    the socket is published, STOPPING=1 when shutdown begins. None notifies nobody."""
    socket_access: SocketAccess = field(default_factory=SocketAccess)
    """Who may connect (``--socket-mode``, ``--socket-group``); default owner-only, 0600."""
    gc_mode: GcMode = "python"
    """``tuned`` settles the heap before the socket opens (``--gc``'s default); ``python`` not."""
    keep_warm_s: float = 0.0
    """``--keep-warm``: rehearse the last real wake after this long without one; 0 never."""


class ExecutorServer:
    """The executor: serve wakes on a Unix socket until told to stop, then shut down in order."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._fire_path = config.fire_path
        self.keep_warm = KeepWarm(config.keep_warm_s)
        self._counters = _Counters()
        self._telemetry: Telemetry | None = None
        self._stopping = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._connections_nursery: trio.Nursery | None = None
        self._fires_nursery: trio.Nursery | None = None
        self._connections: set[Connection] = set()
        self._signals = ShutdownSignals(
            self.request_shutdown, self.cut_grace_short, self._stopping, config.grace_s
        )
        self._notifier = config.notifier or ServiceNotifier(None)
        self._published = False

    def statistics(self) -> ServerStatistics:
        """A consistent snapshot of every counter of ``SERVER_COUNTERS``: the server's own, the
        fire path's (with the order path's it carries) and the log pipeline's."""
        counters = self._counters
        frames = counters.frames
        return ServerStatistics(
            frames=frames.frames,
            accepted=frames.accepted,
            rejected=frames.rejected,
            unacked=frames.unacked,
            fires_cancelled=counters.fires_cancelled,
            fire_errors=counters.fire_errors,
            oversized_frames=frames.oversized_frames,
            connections_opened=counters.connections_opened,
            connections_open=counters.connections_open,
            log_dropped=logs.dropped_count(),
            **self._fire_path.counters().as_dict(),
        )

    @property
    def fire_path(self) -> FirePath:
        """The fire path in use (the order path's once it is open)."""
        return self._fire_path

    @property
    def telemetry(self) -> Telemetry:
        """The telemetry producer (available once ``run`` has started)."""
        if self._telemetry is None:
            raise RuntimeError("the server has not started")
        return self._telemetry

    def request_shutdown(self) -> None:
        """Begin an orderly shutdown (what SIGINT/SIGTERM do); idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._notifier.stopping("shutting down: finishing in-flight frames and fires")
        self._accept_scope.cancel()
        for connection in self._connections:
            if connection.idle:
                connection.stop_reading()
        deadline = trio.current_time() + self.config.grace_s
        if self._connections_nursery is not None:
            self._connections_nursery.cancel_scope.deadline = deadline
        if self._fires_nursery is not None:
            self._fires_nursery.cancel_scope.deadline = deadline

    def cut_grace_short(self) -> None:
        """Cancel in-flight frames and fires now (second signal); queued rows are still written."""
        self.request_shutdown()
        if self._connections_nursery is not None:
            self._connections_nursery.cancel_scope.cancel()
        if self._fires_nursery is not None:
            self._fires_nursery.cancel_scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until ``request_shutdown`` (or a signal), then drain and return.

        ``task_status.started()`` fires once the socket accepts connections.

        Raises:
            SocketSetupError: the socket path is unusable or another executor holds it.
            MetricsSetupError: the ``--metrics`` address cannot be bound.
            TelemetryOpenError: the telemetry database cannot be opened.
        """
        socket_path = self.config.socket_path
        check_socket_path(socket_path)
        check_socket_apart(socket_path, self.config.telemetry_db)
        lock = InstanceLock(socket_path)
        lock.acquire()
        try:
            # Claim the socket (bound and listening, not yet reachable) before creating anything
            # else: a path that cannot be bound leaves the database untouched.
            remove_stale_socket(socket_path)
            prepared = prepare_unix_socket(socket_path, self.config.socket_access)
            metrics: MetricsEndpoint | None = None
            try:
                observe = None
                if self.config.metrics_address is not None:
                    metrics, observe = start_metrics_endpoint(
                        self.config.metrics_address,
                        self.statistics,
                        lambda: self.telemetry.statistics(),
                    )
                    host, port = metrics.address
                    log.info("metrics endpoint listening", host=host, port=port)
                # Everything about the exchange that can fail (key, CA file, reachability, the
                # signing worker) is found before the database is created.
                async with self._exchange_side(), trio.open_nursery() as root:
                    self._notifier.status("opening the telemetry database")
                    self._telemetry = await root.start(
                        functools.partial(
                            serve_telemetry,
                            self.config.telemetry_db,
                            capacity=self.config.telemetry_capacity,
                            linger_s=self.config.telemetry_linger_s,
                            writer_priority=self.config.writer_priority,
                            observe=observe,
                            require_writable=self.config.order_path is not None,
                            intent_journal=self.config.order_path is not None,
                            share_group=self.config.socket_access.group_id,
                        )
                    )
                    await self._serve_published(root, prepared, task_status)
            finally:
                prepared.discard()
                if metrics is not None:
                    with trio.move_on_after(STOP_TIMEOUT_S, shield=True):
                        await trio.to_thread.run_sync(metrics.stop)
        except BaseExceptionGroup as group:
            # A start-up failure is one clear error, not a group the caller has to dig through.
            startup = _sole_startup_error(group)
            if startup is None:
                raise
            raise startup from None
        finally:
            # A start that never published its socket removes the lock file it created.
            lock.release(remove_created=not self._published)
            self._notifier.close()

    def _exchange_side(self) -> AbstractAsyncContextManager[object]:
        if self.config.order_path is not None:
            return self.config.order_path.exchange_side()
        return contextlib.nullcontext()

    def _open_fire_path(self, telemetry: Telemetry) -> AbstractAsyncContextManager[FirePath]:
        if self.config.order_path is not None:
            self._notifier.status("starting the order path")
            return self.config.order_path(telemetry)
        log.info("no exchange configured: fires are decided and counted, nothing is sent")
        return contextlib.nullcontext(self._fire_path)

    async def _serve_published(
        self, root: trio.Nursery, prepared: PreparedSocket, task_status: trio.TaskStatus[None]
    ) -> None:
        """Start the signal task and the fire path, make the socket reachable, serve; close
        telemetry at the end."""
        telemetry = self.telemetry
        signals_scope = trio.CancelScope()
        try:
            # Signals are handled before the socket is reachable: a harness that stops the
            # executor the moment its socket appears must get an orderly exit.
            if self.config.handle_signals:
                await root.start(self._signals.watch, signals_scope)
            # The exchange side (warm start, pre-warmed client, first account poll) is ready
            # before the socket is reachable, and closes only after every fire is done.
            async with self._open_fire_path(telemetry) as fire_path:
                self._fire_path = fire_path
                if self.config.gc_mode == "tuned":
                    settle_heap()  # last before the socket: all that start-up built is frozen
                listener = publish_unix_socket(prepared)
                self._published = True
                # A group behind a folder it cannot pass is a poller that never connects.
                access = self.config.socket_access
                if problem := group_reach_problem(self.config.socket_path, access):
                    log.warning("socket group cannot reach the socket", problem=problem)
                try:
                    await self._serve(listener, task_status)
                finally:
                    remove_socket_file(self.config.socket_path)
        finally:
            signals_scope.cancel()
            telemetry.close()

    def note_early_signal(self, signum: int) -> None:
        """Remember a SIGINT/SIGTERM that arrived before the signal task was listening (safe
        from a plain ``signal.signal`` handler; ``executor.runtime.signals``)."""
        self._signals.note_early(signum)

    async def _serve(
        self, listener: trio.SocketListener, task_status: trio.TaskStatus[None]
    ) -> None:
        async with trio.open_nursery() as fires:
            self._fires_nursery = fires
            fires.start_soon(self.keep_warm.run, lambda: self._fire_path, self._stopping)
            async with trio.open_nursery() as connections:
                self._connections_nursery = connections
                await connections.start(self._accept, listener)
                log.info("listening", socket=os.fspath(self.config.socket_path))
                self._notifier.ready(f"serving on {os.fspath(self.config.socket_path)}")
                task_status.started()
            # Connections are done; fires already started get the rest of the grace period.

    async def _accept(
        self,
        listener: trio.SocketListener,
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]],
    ) -> None:
        assert self._connections_nursery is not None
        try:
            with self._accept_scope:
                await trio.serve_listeners(
                    self._handle_connection,
                    [listener],
                    handler_nursery=self._connections_nursery,
                    task_status=task_status,
                )
        finally:
            # serve_listeners closed the listener on its way out; nobody can connect any more.
            remove_socket_file(self.config.socket_path)

    async def _handle_connection(self, stream: trio.SocketStream) -> None:
        counters = self._counters
        counters.connections_opened += 1
        counters.connections_open += 1
        try:
            await serve_connection(
                stream,
                counters.connections_opened,
                connections=self._connections,
                counters=counters.frames,
                telemetry=self.telemetry,
                start_fire=self._start_fire,
                stopping=self._stopping,
                reads_between_batches=self.config.read_between_batches,
                frame_spans=self.config.frame_spans,
            )
        finally:
            counters.connections_open -= 1

    def _start_fire(self, message: WakeMessage, read_ns: int, acked_ns: int) -> None:
        # Everything that needs no waiting happens here, in the connection's task: a fire with
        # nothing to await ends here, a real order is decided and written here (FirePath.start);
        # only what is left (a response to read, a row to queue) gets a task of its own.
        try:
            started = self._fire_path.start(message, (read_ns, acked_ns))
        except Exception:
            self._counters.fire_errors += 1
            log.exception("fire failed", correlation_id=message.correlation_id)
            return
        finally:
            self.keep_warm.note(message)  # after the order's write: nothing added before it
        if isinstance(started, FireOutcome):
            return
        fires = self._fires_nursery
        assert fires is not None
        fires.start_soon(self._fire, started, message.correlation_id)

    async def _fire(self, rest: FireRest, correlation_id: str) -> None:
        # Refusals are logged (and counted) by the fire path itself.
        try:
            await rest()
        except trio.Cancelled:
            self._counters.fires_cancelled += 1
            log.warning("fire cancelled at shutdown", correlation_id=correlation_id)
            raise
        except Exception:
            self._counters.fire_errors += 1
            log.exception("fire failed", correlation_id=correlation_id)


def _sole_startup_error(error: BaseException) -> Exception | None:
    """The start-up error a group carries when it carries nothing else (groups are never empty)."""
    if isinstance(error, BaseExceptionGroup):
        return _sole_startup_error(error.exceptions[0]) if len(error.exceptions) == 1 else None
    startup_errors = (SocketSetupError, MetricsSetupError, TelemetryOpenError, StartupError)
    return error if isinstance(error, startup_errors) else None


__all__ = [
    "DEFAULT_GRACE_S",
    "ExecutorServer",
    "ServerConfig",
    "SocketSetupError",
]
