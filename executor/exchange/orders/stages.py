"""Stage rows of one fire: ``order_build``, ``sign``, ``dispatch_send``, ``dispatch_ack``,
``detect_fire`` (DISPATCH.md §6), and ``dispatch_wire`` / ``detect_wire`` (§10: to the ``wire``
stamp, the request's last byte handed to the kernel), built from perf-counter stamps after the
dispatch resolved. The ``sign`` row's metadata also says how the signature was had
(``"presigned"`` from the pool made ahead, or ``"inline"``).

Every stamp is a ``time.perf_counter_ns()`` value held in a :class:`FireStamps` while the order is
built and sent; nothing here runs until the dispatch is over. A row is made only when both of its
stamps exist, so a dispatch cut short (an error, a timeout, shutdown) leaves the rows it reached.

Anchoring: the reference stamps every row at the moment it is recorded. Here each row's
``started_at_ms``/``ended_at_ms`` is when its span really happened: the perf stamps are turned into
wall-clock milliseconds through one offset (wall ns minus perf ns) read once, when the order path
is assembled at start-up (:class:`PerfToWall`). A wall-clock step after start-up shifts rows by
that step; durations never move (docs/design/port-fidelity.md).

The matching engine's clock ([ours]): a V2 order response carries ``ts_ms``, the engine's time
of the order (the exchange's clock, whole ms). Two derived rows split the round trip at it:
``wire_engine`` (``wire`` -> ``ts_ms``) and ``engine_ack`` (``ts_ms`` -> ``ack``). Their sum is
the measured ``wire`` -> ``ack`` span whatever the clocks; each alone carries the offset between
the exchange's clock and this host's. The offset is estimated per order the way NTP does, assuming
the request and the answer took equally long: ``(wire_engine - engine_ack) / 2``, within
``(ack - wire) / 2`` plus the 1 ms of ``ts_ms``'s resolution; both go in the rows' metadata
(``engine_offset_ms``, ``engine_offset_within_ms``). On the fake both clocks are this host's, so
the estimate says how well the method does (0 within its bound), not how far Kalshi's clock is.

:func:`log_resolution` writes the resolved order's one INFO line (with its ``detect_fire``), also
after the dispatch, from the same rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import structlog

from executor.exchange.messages import OrderStamps, order_payload
from executor.recording.rows import LatencyRow, OrderRow, Stage
from executor.wire.protocol import WakeMessage

log = structlog.get_logger()

_DRY_RUN_JSON: Final = {False: '{"dry_run": false}', True: '{"dry_run": true}'}
"""The rows' ``metadata_json``, the same spelling as the ``wake_recv`` rows'."""

_SIGN_JSON: Final = {
    (dry_run, how): f'{{"dry_run": {str(dry_run).lower()}, "signature": "{how}"}}'
    for dry_run in (False, True)
    for how in ("presigned", "inline")
}
"""The ``sign`` row's ``metadata_json`` once the transport said how it got the signature."""


@dataclass(slots=True)
class FireStamps:
    """What one fire's dispatch stamped, filled as it goes (None where it was not reached).

    Attributes:
        build_start_ns: perf stamp before the order was built from the template.
        build_end_ns: perf stamp after the body bytes existed.
        submitted_at_ms: wall-clock ms read just before the request went to the transport.
        order: the transport's own stamps (sign, sent, ack), reset by it per attempt.
        resolution: the ``orders_fired`` resolution row the dispatcher queued, once it did (for
            the fire's log line, written after the dispatch).
    """

    build_start_ns: int | None = None
    build_end_ns: int | None = None
    submitted_at_ms: int | None = None
    order: OrderStamps = field(default_factory=OrderStamps)
    resolution: OrderRow | None = None
    engine_ts_ms: int | None = None
    """The order response's ``ts_ms`` (the matching engine's clock), when it had one."""
    read_ns: int | None = None
    """The connection loop's stamp once the wake's bytes were read (its ``wake_recv`` start)."""
    acked_ns: int | None = None
    """When the wake's ack had been handed to the kernel (its ``wake_recv`` end)."""
    fire_ns: int | None = None
    """When the fire path took the wake (after the hand-off from the connection loop)."""
    decided_ns: int | None = None
    """When the decision (checks, sizing, kill switch, risk gate) had answered."""


def engine_ts_ms(response: dict[str, Any]) -> int | None:
    """The ``ts_ms`` of an order response (an integer of Unix ms), or None."""
    value = order_payload(response).get("ts_ms")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PerfToWall:
    """Turns perf-counter stamps into wall-clock ms through one offset read at construction."""

    __slots__ = ("offset_ns",)

    def __init__(self) -> None:
        self.offset_ns = time.time_ns() - time.perf_counter_ns()

    def wall_ms(self, perf_ns: int) -> int:
        """The wall-clock millisecond at which ``perf_ns`` was read."""
        return (perf_ns + self.offset_ns) // 1_000_000


PATH_STAMPS: Final = (
    "read",
    "acked",
    "fire",
    "decided",
    "build",
    "built",
    "sign",
    "signed",
    "sent",
    "wire",
)
"""The stamps of a real fire's path to the wire, in path order (``detect_wire``'s ``path_us``):
the wake read, its ack out, the fire path taking it, the decision made, the body's build begun and
done, the signature asked for and had, the request made (``sent``) and written (``wire``)."""


def path_us(message: WakeMessage, stamps: FireStamps) -> dict[str, float]:
    """Each reached stamp of :data:`PATH_STAMPS`, in µs after ``message.recv_ns`` (0.1 µs)."""
    order = stamps.order
    values = (
        stamps.read_ns,
        stamps.acked_ns,
        stamps.fire_ns,
        stamps.decided_ns,
        stamps.build_start_ns,
        stamps.build_end_ns,
        order.sign_start_ns,
        order.sign_end_ns,
        order.sent_ns,
        order.wire_ns,
    )
    origin = message.recv_ns
    return {
        name: round((value - origin) / 1000, 1)
        for name, value in zip(PATH_STAMPS, values, strict=True)
        if value is not None
    }


def _detect_wire_metadata(message: WakeMessage, stamps: FireStamps) -> str:
    return orjson.dumps({"dry_run": message.dry_run, "path_us": path_us(message, stamps)}).decode()


def stage_rows(
    message: WakeMessage,
    stamps: FireStamps,
    clock: PerfToWall,
    local_clock_domain: str,
) -> list[LatencyRow]:
    """The stage rows one fire earned: each stage whose two stamps both exist.

    ``detect_fire`` (``sent - message.recv_ns``) and ``detect_wire`` (``wire -
    message.recv_ns``) are measured directly, and only when the wake's ``recv_ns`` was read on
    this process's clock (``recv_ns > 0`` and equal, non-empty clock domains); a wake from another
    clock gets neither row.
    """
    order = stamps.order
    metadata = _DRY_RUN_JSON[message.dry_run]
    sign_metadata = _SIGN_JSON.get((message.dry_run, order.signature or ""), metadata)
    correlation_id = message.correlation_id
    spans = [
        (Stage.ORDER_BUILD, stamps.build_start_ns, stamps.build_end_ns, metadata),
        (Stage.SIGN, order.sign_start_ns, order.sign_end_ns, sign_metadata),
        (Stage.DISPATCH_SEND, order.sign_end_ns, order.sent_ns, metadata),
        (Stage.DISPATCH_ACK, order.sent_ns, order.ack_ns, metadata),
    ]
    if message.is_clock_comparable_to(local_clock_domain):
        spans.append((Stage.DETECT_FIRE, message.recv_ns, order.sent_ns, metadata))
    spans.append((Stage.DISPATCH_WIRE, order.sent_ns, order.wire_ns, metadata))
    if order.wire_ns is not None and message.is_clock_comparable_to(local_clock_domain):
        wire_metadata = _detect_wire_metadata(message, stamps)
        spans.append((Stage.DETECT_WIRE, message.recv_ns, order.wire_ns, wire_metadata))
    rows = [
        LatencyRow(
            correlation_id,
            stage,
            clock.wall_ms(start),
            clock.wall_ms(end),
            (end - start) / 1_000_000,
            row_metadata,
        )
        for stage, start, end, row_metadata in spans
        if start is not None and end is not None
    ]
    engine_ms, wire_ns, ack_ns = stamps.engine_ts_ms, order.wire_ns, order.ack_ns
    if engine_ms is not None and wire_ns is not None and ack_ns is not None:
        rows.extend(engine_rows(correlation_id, engine_ms, wire_ns, ack_ns, clock))
    return rows


def engine_rows(
    correlation_id: str, engine_ms: int, wire_ns: int, ack_ns: int, clock: PerfToWall
) -> list[LatencyRow]:
    """The ``wire_engine`` and ``engine_ack`` rows of one answered order (module docstring)."""
    wire_ms = (wire_ns + clock.offset_ns) / 1_000_000
    ack_ms = (ack_ns + clock.offset_ns) / 1_000_000
    to_engine, from_engine = engine_ms - wire_ms, ack_ms - engine_ms
    metadata = orjson.dumps(
        {
            "dry_run": False,
            "engine_offset_ms": round((to_engine - from_engine) / 2, 3),
            "engine_offset_within_ms": round((ack_ms - wire_ms) / 2 + 1.0, 3),
        }
    ).decode()
    return [
        LatencyRow(correlation_id, Stage.WIRE_ENGINE, int(wire_ms), engine_ms, to_engine, metadata),
        LatencyRow(correlation_id, Stage.ENGINE_ACK, engine_ms, int(ack_ms), from_engine, metadata),
    ]


def log_resolution(row: OrderRow | None, stage_rows: list[LatencyRow]) -> None:
    """One INFO line for a resolved real order: what was asked, what the exchange answered, and
    the fire's ``detect_fire`` in ms (None when the wake's clock was not this host's).

    Called once the dispatch is over and its stage rows exist, never inside the timed span; the
    logger only enqueues the line (``executor.logs``).
    """
    if row is None:  # the dispatch never got as far as a resolution (nothing was minted)
        return
    detect_fire_ms = next(
        (latency.duration_ms for latency in stage_rows if latency.stage is Stage.DETECT_FIRE), None
    )
    log.info(
        "order resolved",
        ticker=row.ticker,
        side=row.outcome_side,
        count=row.count,
        price=row.price_dollars,
        status=row.status.value,
        fill_count=row.fill_count,
        kalshi_order_id=row.kalshi_order_id,
        detect_fire_ms=None if detect_fire_ms is None else round(detect_fire_ms, 3),
        error=row.error_message,
        client_order_id=row.client_order_id,
        correlation_id=row.correlation_id,
    )
