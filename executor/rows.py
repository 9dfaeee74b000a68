"""The rows telemetry writes: the reference's stage vocabulary and ``latency_events`` rows.

Plain values with no I/O, shared by the producers (the connection loop, the fire path) and the
SQLite writer.
"""

from __future__ import annotations

import enum
from typing import Final, NamedTuple

_DRY_RUN_FALSE_JSON: Final = '{"dry_run": false}'
_DRY_RUN_TRUE_JSON: Final = '{"dry_run": true}'

class Stage(enum.StrEnum):
    """The reference system's stage vocabulary (``latency_events.stage``)."""

    DETECT_FIRE = "detect_fire"
    INGEST_FETCH = "ingest_fetch"
    DECISION = "decision"
    WAKE_SEND = "wake_send"
    WAKE_RECV = "wake_recv"
    ORDER_BUILD = "order_build"
    SIGN = "sign"
    DISPATCH_SEND = "dispatch_send"
    DISPATCH_ACK = "dispatch_ack"
    TELEMETRY_WRITE = "telemetry_write"


class LatencyRow(NamedTuple):
    """One ``latency_events`` row; field order is the INSERT's column order."""

    correlation_id: str
    stage: Stage
    started_at_ms: int
    ended_at_ms: int
    duration_ms: float
    metadata_json: str | None


def latency_row(
    correlation_id: str,
    stage: Stage | str,
    started_at_ms: int,
    ended_at_ms: int,
    duration_ms: float,
    metadata_json: str | None = None,
) -> LatencyRow:
    """Build a row, validating ``stage`` against the vocabulary.

    Raises:
        ValueError: ``stage`` is not one of :class:`Stage`'s values.
    """
    return LatencyRow(
        correlation_id, Stage(stage), started_at_ms, ended_at_ms, duration_ms, metadata_json
    )


def wake_recv_row(
    correlation_id: str, started_at_ms: int, ended_at_ms: int, duration_ns: int, dry_run: bool
) -> LatencyRow:
    """The ``wake_recv`` row for one acked frame; no serializer call, the metadata is prebuilt."""
    return LatencyRow(
        correlation_id,
        Stage.WAKE_RECV,
        started_at_ms,
        ended_at_ms,
        duration_ns / 1_000_000,
        _DRY_RUN_TRUE_JSON if dry_run else _DRY_RUN_FALSE_JSON,
    )
