"""The heartbeat: one ``heartbeats`` row per executor instance, rewritten every
``HEARTBEAT_INTERVAL_S`` while it runs (the reference's table, read by ``executor stats``).

A recording job: the row says this process is alive, how deep the telemetry channel is and how
many rows it has dropped (and, in the executor's own counters table, how many lookups ended
unknown). The composition root (``executor.trading.assembly``) starts :func:`serve_heartbeats`
beside the account poll; a heartbeat that is written is also what ends an audit-trail outage.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol

import trio

from executor.clock import wall_ms
from executor.recording.rows import HeartbeatRow

HEARTBEAT_INTERVAL_S: Final = 10.0
"""Seconds between heartbeat rows (the reference's interval)."""

HEARTBEAT_PROCESS: Final = "executor"
"""``heartbeats.process`` of an executor (the reference's name for it), alone when no instance is
known (a test's), else followed by the instance (:func:`heartbeat_process_for`)."""


class HeartbeatSink(Protocol):
    """Where heartbeat rows go (``executor.telemetry.Telemetry`` fits)."""

    async def record_order(self, row: HeartbeatRow) -> None: ...


def heartbeat_process_for(socket_path: Path) -> str:
    """``heartbeats.process`` of the executor serving ``socket_path``: ``executor:`` and the
    socket's absolute path. The socket names the instance (one executor at a time holds it), so
    two executors that have written one file are two rows, and a restart replaces its own row."""
    return f"{HEARTBEAT_PROCESS}:{os.path.abspath(socket_path)}"


async def serve_heartbeats(
    sink: HeartbeatSink,
    queue_depth: Callable[[], int],
    dropped_rows: Callable[[], int],
    *,
    interval_s: float = HEARTBEAT_INTERVAL_S,
    process: str = HEARTBEAT_PROCESS,
    lookups_unknown: Callable[[], int] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Write the heartbeat row of ``process`` now and every ``interval_s`` until cancelled;
    ``started_at_ms`` is when this run began. ``lookups_unknown``, when given, is read into
    each row too (the executor's own counters table beside the reference's heartbeats)."""
    started_at_ms = wall_ms()
    pid = os.getpid()
    task_status.started()
    while True:
        row = HeartbeatRow(
            process=process,
            pid=pid,
            started_at_ms=started_at_ms,
            beat_at_ms=wall_ms(),
            queue_depth=queue_depth(),
            dropped_rows=dropped_rows(),
            lookups_unknown=None if lookups_unknown is None else lookups_unknown(),
        )
        await sink.record_order(row)
        await trio.sleep(interval_s)


__all__ = [
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_PROCESS",
    "HeartbeatSink",
    "heartbeat_process_for",
    "serve_heartbeats",
]
