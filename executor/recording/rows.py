"""The rows telemetry writes: ``latency_events`` rows, ``orders_fired`` rows and heartbeats.

Plain values with no I/O, shared by the producers (the connection loop, the fire path) and the
SQLite writer.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any, Final, NamedTuple, TypeAlias

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
    DISPATCH_WIRE = "dispatch_wire"
    """[ours] ``sent`` -> the request's last byte handed to the kernel (DISPATCH.md §10)."""
    DETECT_WIRE = "detect_wire"
    """[ours] the wake's ``recv_ns`` -> the ``wire`` stamp, ``detect_fire``'s clock rule."""
    STREAM_ROW = "stream_row"
    """[ours] the exchange's ``ts_ms`` of a fill or order update -> its row queued (the stream)."""
    WIRE_ENGINE = "wire_engine"
    """[ours] the ``wire`` stamp -> the order response's ``ts_ms`` (the matching engine's clock)."""
    ENGINE_ACK = "engine_ack"
    """[ours] the order response's ``ts_ms`` -> the ``ack`` stamp (the engine's clock to ours)."""
    WAKE_FRAME = "wake_frame"
    """[ours] a frame's own work: its stamp -> its own ack encoded, before any later frame of its
    join is decoded and before the ``send`` (``executor serve --frame-spans`` only)."""


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
    correlation_id: str,
    started_at_ms: int,
    ended_at_ms: int,
    duration_ns: int,
    dry_run: bool,
    stage: Stage = Stage.WAKE_RECV,
) -> LatencyRow:
    """The ``wake_recv`` row for one acked frame (or, given ``Stage.WAKE_FRAME``, its own span's
    row, with the same metadata); no serializer call, the metadata is prebuilt."""
    return LatencyRow(
        correlation_id,
        stage,
        started_at_ms,
        ended_at_ms,
        duration_ns / 1_000_000,
        _DRY_RUN_TRUE_JSON if dry_run else _DRY_RUN_FALSE_JSON,
    )


class OrderStatus(enum.StrEnum):
    """``orders_fired.status``: the values its CHECK allows."""

    PENDING = "pending"
    SUBMITTED = "submitted"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FILLED = "filled"
    CANCELED = "canceled"
    ERROR = "error"


class OrderRowKind(enum.Enum):
    """How the writer applies an :class:`OrderRow` (DISPATCH.md §4 steps 4, 7 and 8)."""

    PENDING = "pending"
    """INSERT of the request, before it is sent, unless its order has a row already (its
    resolution landed first)."""
    RESOLUTION = "resolution"
    """Upsert on ``client_order_id``: every column but it and ``requested_at_ms`` is replaced, so
    a resolution whose pending row was dropped still lands whole."""
    REJECTED = "rejected"
    """Plain INSERT of an order the fire path refused before sending."""
    ADOPTED = "adopted"
    """INSERT of an order found on the exchange with no local record, unless it has a row by
    then (``executor.exchange.follow.adoption``); a pending row is written the same way."""


@dataclass(frozen=True, slots=True)
class OrderRow:
    """One ``orders_fired`` write; every field but ``kind`` is the column of the same name.

    Values are stored as given: the fixed-point strings (``count``, ``price_dollars``, the fill
    columns) are the caller's to format, and ``None`` is NULL.
    """

    kind: OrderRowKind
    correlation_id: str
    client_order_id: str
    kalshi_order_id: str | None
    ticker: str
    correlation_group: str | None
    outcome_side: str
    count: str
    price_dollars: str
    time_in_force: str
    self_trade_prevention_type: str
    post_only: int | None
    status: OrderStatus
    error_message: str | None
    fill_count: str | None
    remaining_count: str | None
    average_fill_price: str | None
    average_fee_paid: str | None
    requested_at_ms: int
    submitted_at_ms: int | None
    acknowledged_at_ms: int | None


@dataclass(frozen=True, slots=True)
class HeartbeatRow:
    """One ``heartbeats`` row (INSERT OR REPLACE: one row per process), and with an exchange the
    executor's own counters beside it (``executor_heartbeats``: the reference's table has no
    column for them)."""

    process: str
    pid: int
    started_at_ms: int
    beat_at_ms: int
    queue_depth: int
    dropped_rows: int
    lookups_unknown: int | None = None
    """This run's lookups that ended unknown so far (None: no exchange, no counters row)."""


TelemetryRow: TypeAlias = LatencyRow | OrderRow | HeartbeatRow
"""Anything the telemetry channel carries."""


def row_fields(row: OrderRow) -> dict[str, Any]:
    """The order row as a plain dict for a log line (the kind and status as their values)."""
    fields = asdict(row)
    fields["kind"] = row.kind.value
    fields["status"] = str(row.status)
    return fields


def order_values(row: OrderRow) -> tuple[object, ...]:
    """The row's 20 ``orders_fired`` column values, in the table's order (the status as its plain
    string): what the writer binds and what an intent record holds after the row's kind."""
    return (
        row.correlation_id,
        row.client_order_id,
        row.kalshi_order_id,
        row.ticker,
        row.correlation_group,
        row.outcome_side,
        row.count,
        row.price_dollars,
        row.time_in_force,
        row.self_trade_prevention_type,
        row.post_only,
        str(row.status),
        row.error_message,
        row.fill_count,
        row.remaining_count,
        row.average_fill_price,
        row.average_fee_paid,
        row.requested_at_ms,
        row.submitted_at_ms,
        row.acknowledged_at_ms,
    )
