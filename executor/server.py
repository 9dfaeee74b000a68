"""The executor service: one root nursery, the connection loop, fires, and orderly shutdown.

Task tree (every task lives inside ``ExecutorServer.run``'s root nursery)::

    root
    |-- telemetry consumer          started first: the database is open before any row exists
    |-- signals                     SIGINT/SIGTERM -> shutdown; a second one cuts the grace short
    `-- service
        |-- fires nursery           one task per accepted fire
        `-- connections nursery     one task per connection, fed by serve_listeners

The timed span (``wake_recv``) runs from the stamp taken right after a frame's last byte arrived
to the moment the ack's last byte was handed to the kernel. Inside it there is only decoding,
encoding the ack, and a non-blocking ``send``; the task waits for writability only if the send
would block. The Trio checkpoint every loop iteration owes (cancellation, fairness) is taken after
the span closes: a pipelining connection yields once per frame, so it cannot starve the others.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import structlog
import trio

from executor.fire import FirePath
from executor.protocol import (
    MAX_FRAME_BYTES,
    PREFIX_BYTES,
    DecodeError,
    FrameTooLargeError,
    WakeMessage,
    decode_wake_message,
    encode_accepted_ack,
    encode_rejected_ack,
    parse_frame_length,
)
from executor.telemetry import (
    BATCH_LINGER_S,
    CHANNEL_CAPACITY,
    Telemetry,
    TelemetryOpenError,
    serve_telemetry,
    wake_recv_row,
)
from executor.unixsocket import (
    InstanceLock,
    SocketSetupError,
    bind_unix_listener,
    check_socket_path,
    remove_socket_file,
    remove_stale_socket,
)

log = structlog.get_logger()

DEFAULT_GRACE_S: Final = 5.0
"""How long in-flight frames and fires may run after a shutdown signal (seconds)."""

RECEIVE_BUFFER_BYTES: Final = 2 * (PREFIX_BYTES + MAX_FRAME_BYTES)
"""One connection's read buffer: room for a whole maximal frame wherever the last one ended."""

_PEER_GONE: Final = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


@dataclass(frozen=True)
class ServerStatistics:
    """Counters of frames and fires since start (SERVICE.md defines each)."""

    frames: int
    accepted: int
    rejected: int
    fired: int
    refused_price: int
    refused_kill_switch: int
    unacked: int
    fires_cancelled: int
    fire_errors: int
    oversized_frames: int
    connections_opened: int
    connections_open: int

    def counters_line(self) -> str:
        """The first exit line, in the C++ port's key=value format plus this executor's keys."""
        return (
            f"frames={self.frames} accepted={self.accepted} rejected={self.rejected} "
            f"fired={self.fired} refused_price={self.refused_price} "
            f"refused_kill_switch={self.refused_kill_switch} unacked={self.unacked} "
            f"fires_cancelled={self.fires_cancelled} fire_errors={self.fire_errors}"
        )


@dataclass
class _Counters:
    frames: int = 0
    accepted: int = 0
    rejected: int = 0
    unacked: int = 0
    fires_cancelled: int = 0
    fire_errors: int = 0
    oversized_frames: int = 0
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
    handle_signals: bool = True


class _PeerGone(Exception):
    """The peer closed or reset the connection."""


class _Connection:
    """One peer: a non-blocking socket and a fixed receive buffer with exact-length reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray(RECEIVE_BUFFER_BYTES)
        self.view = memoryview(self.buffer)
        self.start = 0  # first unconsumed byte
        self.end = 0  # one past the last received byte
        self.waited = False  # whether this frame's reads went through the scheduler
        self.idle = False  # waiting for the first bytes of a frame

    async def receive_at_least(self, size: int) -> bool:
        """Make ``size`` unconsumed bytes available; False on EOF (clean or mid-frame)."""
        if self.start == self.end:
            self.start = self.end = 0
        elif len(self.buffer) - self.start < size:
            pending = self.end - self.start
            self.buffer[:pending] = self.buffer[self.start : self.end]
            self.start, self.end = 0, pending
        while self.end - self.start < size:
            try:
                received = self.sock.recv_into(self.view[self.end :])
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_readable(self.sock)
                continue
            except _PEER_GONE:
                return False
            if received == 0:
                return False
            self.end += received
        return True

    def send_now(self, data: bytes | memoryview) -> int:
        """One non-blocking ``send`` of ``data``; the bytes the kernel took (0 when it was full).

        The hot path's common case: no coroutine, no scheduler, one system call.

        Raises:
            _PeerGone: the peer closed or reset the connection.
        """
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0
        except _PEER_GONE as error:
            raise _PeerGone(str(error)) from None

    async def send_all(self, data: bytes, already_sent: int = 0) -> None:
        """Write the rest of ``data`` (from ``already_sent``), waiting for writability as needed.

        Raises:
            _PeerGone: the peer closed or reset the connection.
        """
        view = memoryview(data)[already_sent:]
        while view:
            sent = self.send_now(view)
            if sent == 0:
                self.waited = True
                await trio.lowlevel.wait_writable(self.sock)
            view = view[sent:]

    def stop_reading(self) -> None:
        """End an idle wait: the pending read sees end-of-file (used at shutdown)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RD)

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


class ExecutorServer:
    """The executor: serve wakes on a Unix socket until told to stop, then shut down in order."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._fire_path = config.fire_path
        self._counters = _Counters()
        self._telemetry: Telemetry | None = None
        self._stopping = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._connections_nursery: trio.Nursery | None = None
        self._fires_nursery: trio.Nursery | None = None
        self._connections: set[_Connection] = set()
        self._early_signals: list[int] = []

    # ---------------------------------------------------------------- public surface

    def statistics(self) -> ServerStatistics:
        """A consistent snapshot of the frame and fire counters."""
        counters = self._counters
        fires = self._fire_path.counters()
        return ServerStatistics(
            frames=counters.frames,
            accepted=counters.accepted,
            rejected=counters.rejected,
            fired=fires.fired,
            refused_price=fires.refused_price,
            refused_kill_switch=fires.refused_kill_switch,
            unacked=counters.unacked,
            fires_cancelled=counters.fires_cancelled,
            fire_errors=counters.fire_errors,
            oversized_frames=counters.oversized_frames,
            connections_opened=counters.connections_opened,
            connections_open=counters.connections_open,
        )

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
            TelemetryOpenError: the telemetry database cannot be opened.
        """
        socket_path = self.config.socket_path
        check_socket_path(socket_path)
        lock = InstanceLock(socket_path)
        lock.acquire()
        try:
            # Refuse an unusable socket path before creating anything (the database included).
            remove_stale_socket(socket_path)
            async with trio.open_nursery() as root:
                self._telemetry = await root.start(
                    functools.partial(
                        serve_telemetry,
                        self.config.telemetry_db,
                        capacity=self.config.telemetry_capacity,
                        linger_s=self.config.telemetry_linger_s,
                    )
                )
                signals_scope = trio.CancelScope()
                try:
                    # Signals are handled before the socket is reachable: a harness that stops the
                    # executor the moment its socket appears must get an orderly exit.
                    if self.config.handle_signals:
                        await root.start(self._watch_signals, signals_scope)
                    listener = bind_unix_listener(socket_path)
                except BaseException:
                    signals_scope.cancel()
                    self._telemetry.close()
                    raise
                try:
                    await self._serve(listener, task_status)
                finally:
                    remove_socket_file(socket_path)
                    signals_scope.cancel()
                    self._telemetry.close()
        except BaseExceptionGroup as group:
            # A start-up failure is one clear error, not a group the caller has to dig through.
            startup = _sole_startup_error(group)
            if startup is None:
                raise
            raise startup from None
        finally:
            lock.release()

    # ---------------------------------------------------------------- tasks

    def note_early_signal(self, signum: int) -> None:
        """Remember a SIGINT/SIGTERM that arrived before the signal task was listening.

        Safe to call from a plain ``signal.signal`` handler, even before ``trio.run`` has started:
        it only records the signal; the signal task acts on it as soon as it starts.
        """
        self._early_signals.append(signum)

    async def _watch_signals(
        self, scope: trio.CancelScope, *, task_status: trio.TaskStatus[None]
    ) -> None:
        with scope, trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            if self._early_signals:
                name = signal.Signals(self._early_signals[0]).name
                log.info("shutdown requested during start-up", signal=name)
                self.request_shutdown()
            async for signum in signals:
                name = signal.Signals(signum).name
                if not self._stopping.is_set():
                    log.info("shutdown requested", signal=name, grace_s=self.config.grace_s)
                    self.request_shutdown()
                else:
                    log.warning("second signal: cutting the grace period short", signal=name)
                    self.cut_grace_short()

    async def _serve(
        self, listener: trio.SocketListener, task_status: trio.TaskStatus[None]
    ) -> None:
        async with trio.open_nursery() as fires:
            self._fires_nursery = fires
            async with trio.open_nursery() as connections:
                self._connections_nursery = connections
                await connections.start(self._accept, listener)
                log.info("listening", socket=os.fspath(self.config.socket_path))
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
        conn_id = counters.connections_opened
        # Detach the fd from Trio's wrappers: the hot path calls the non-blocking socket directly.
        sock = socket.socket(fileno=stream.socket.detach())
        connection = _Connection(sock)
        self._connections.add(connection)
        stats = {"frames": 0, "accepted": 0, "rejected": 0}
        log.info("connection opened", connection=conn_id)
        reason = "eof"
        try:
            reason = await self._connection_loop(connection, stats)
        except _PeerGone:
            reason = "peer gone"
        except trio.Cancelled:
            reason = "cancelled"
            raise
        except Exception:
            reason = "error"
            log.exception("connection failed", connection=conn_id)
        finally:
            self._connections.discard(connection)
            connection.close()
            counters.connections_open -= 1
            log.info("connection closed", connection=conn_id, reason=reason, **stats)

    async def _connection_loop(self, connection: _Connection, stats: dict[str, int]) -> str:
        counters = self._counters
        telemetry = self.telemetry
        fires = self._fires_nursery
        assert fires is not None
        perf_ns = time.perf_counter_ns
        wall_ns = time.time_ns
        while True:
            connection.waited = False
            # Between frames the task is idle; a shutdown ends exactly this wait, by shutting the
            # socket's read side (a per-frame CancelScope cost ~7 us on the wake-up path).
            if self._stopping.is_set():
                return "shutdown"
            connection.idle = True
            try:
                if not await connection.receive_at_least(PREFIX_BYTES):
                    return "shutdown" if self._stopping.is_set() else "eof"
            finally:
                connection.idle = False
            prefix_start = connection.start
            try:
                length = parse_frame_length(
                    connection.view[prefix_start : prefix_start + PREFIX_BYTES]
                )
            except FrameTooLargeError as error:
                counters.oversized_frames += 1
                log.warning("oversized frame: closing connection", declared=error.declared)
                return "oversized frame"
            if not await connection.receive_at_least(PREFIX_BYTES + length):
                return "eof mid-frame"
            # ---- timed span: stamp -> decode -> ack encode -> ack write ----
            stamp_ns = perf_ns()
            received_at_ms = wall_ns() // 1_000_000
            # Re-read the offset: receiving the body may have compacted the buffer.
            body_start = connection.start + PREFIX_BYTES
            connection.start = body_start + length
            counters.frames += 1
            stats["frames"] += 1
            try:
                message = decode_wake_message(connection.view[body_start : connection.start])
            except DecodeError as error:
                counters.rejected += 1
                stats["rejected"] += 1
                await connection.send_all(encode_rejected_ack(str(error), received_at_ms))
                log.warning("rejected frame", field=error.field, reason=str(error))
                await self._checkpoint_unless_waited(connection)
                continue
            counters.accepted += 1
            stats["accepted"] += 1
            try:
                ack = encode_accepted_ack(message.correlation_id, received_at_ms)
                sent = connection.send_now(ack)
                if sent < len(ack):
                    await connection.send_all(ack, sent)
            except BaseException:
                counters.unacked += 1
                raise
            done_ns = perf_ns()
            # ---- span closed ----
            telemetry.record(
                wake_recv_row(
                    message.correlation_id,
                    received_at_ms,
                    wall_ns() // 1_000_000,
                    done_ns - stamp_ns,
                    message.dry_run,
                )
            )
            fires.start_soon(self._fire, message)
            await self._checkpoint_unless_waited(connection)

    @staticmethod
    async def _checkpoint_unless_waited(connection: _Connection) -> None:
        # Every frame passes through the scheduler once; a frame whose reads already waited did.
        if not connection.waited:
            await trio.lowlevel.checkpoint()

    async def _fire(self, message: WakeMessage) -> None:
        # Refusals are logged (and counted) by the fire path itself.
        try:
            await self._fire_path.fire(message)
        except trio.Cancelled:
            self._counters.fires_cancelled += 1
            log.warning("fire cancelled at shutdown", correlation_id=message.correlation_id)
            raise
        except Exception:
            self._counters.fire_errors += 1
            log.exception("fire failed", correlation_id=message.correlation_id)


def _sole_startup_error(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    """The start-up error a group carries when it carries nothing else."""
    leaves: list[BaseException] = []

    def collect(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                collect(inner)
        else:
            leaves.append(error)

    collect(group)
    if len(leaves) == 1 and isinstance(leaves[0], (SocketSetupError, TelemetryOpenError)):
        return leaves[0]
    return None


def default_telemetry_db() -> Path:
    """Where rows go without ``--telemetry-db``: ``$XDG_STATE_HOME/trio-executor/telemetry.db``."""
    state_home = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state_home) / "trio-executor" / "telemetry.db"


__all__ = [
    "DEFAULT_GRACE_S",
    "ExecutorServer",
    "ServerConfig",
    "ServerStatistics",
    "SocketSetupError",
    "default_telemetry_db",
]
