"""One connection from accept to close: take the socket over, serve its frames, say how it ended.

``executor.server`` accepts connections (``trio.serve_listeners``) and counts them; this module
runs each one. The accepted stream's file descriptor is detached from Trio's wrappers, because
the hot path (``executor.wire.connection``) calls the non-blocking socket directly. The
connection is registered in the server's set while it is served, so shutdown can end an idle
read (``Connection.stop_reading``). An error in one connection is logged and ends only that
connection; its open and close lines carry the connection's number and frame counts.
"""

from __future__ import annotations

import socket
from typing import Final

import structlog
import trio

from executor.logs import RateLimitedWarning
from executor.telemetry import Telemetry
from executor.wire.connection import (
    FRAME_READ_TIMEOUT_S,
    Connection,
    FrameCounters,
    FrameReadTimeout,
    PeerGone,
    serve_frames,
)
from executor.wire.handoff import StartFire, another_connection_waiting

log = structlog.get_logger()

_stalled_frame_warnings: Final = RateLimitedWarning(
    "incomplete frame timed out: closing connection"
)


async def serve_connection(
    stream: trio.SocketStream,
    connection_number: int,
    *,
    connections: set[Connection],
    counters: FrameCounters,
    telemetry: Telemetry,
    start_fire: StartFire,
    stopping: trio.Event,
    reads_between_batches: bool = False,
    frame_spans: bool = False,
) -> None:
    """Serve one accepted connection until it ends, then close it; never raises but Cancelled.

    Args:
        stream: the accepted connection; its socket is taken over (detached) here.
        connection_number: the connection's number since start, for its log lines.
        connections: the server's open connections; this one is in it while it is served.
        counters: the server-wide frame counters.
        telemetry: where ``wake_recv`` rows go.
        start_fire: starts the fire of an acked wake; never blocks.
        stopping: set once shutdown has begun.
        reads_between_batches: read between the batches of one read's frames even when the
            telemetry writer has fallen behind (``executor.wire.connection``).
        frame_spans: also record each frame's own span, ``wake_frame`` (``serve_frames``).

    Cancellation: the close line says ``cancelled`` and the cancellation propagates.
    """
    # Detach the fd from Trio's wrappers: the hot path calls the non-blocking socket directly.
    sock = socket.socket(fileno=stream.socket.detach())
    connection = Connection(sock, reads_between_batches=reads_between_batches)
    connections.add(connection)
    stats = {"frames": 0, "accepted": 0, "rejected": 0}
    log.info("connection opened", connection=connection_number)
    reason = "eof"
    try:
        reason = await serve_frames(
            connection,
            counters=counters,
            stats=stats,
            telemetry=telemetry,
            start_fire=start_fire,
            stopping=stopping,
            others_waiting=lambda: another_connection_waiting(connections, connection),
            frame_spans=frame_spans,
        )
    except PeerGone:
        reason = "peer gone"
    except FrameReadTimeout:
        reason = "frame read timed out"
        _stalled_frame_warnings.warning(
            connection=connection_number,
            timeout_s=FRAME_READ_TIMEOUT_S,
            buffered_bytes=connection.end - connection.start,
        )
    except trio.Cancelled:
        reason = "cancelled"
        raise
    except Exception:
        reason = "error"
        log.exception("connection failed", connection=connection_number)
    finally:
        connections.discard(connection)
        connection.close()
        log.info("connection closed", connection=connection_number, reason=reason, **stats)


__all__ = ["serve_connection"]
