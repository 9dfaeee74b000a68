"""Experiments, not product: ``executor serve`` with one change patched in, for A/B runs.

``python -m bench.experiments.variants VARIANT[+VARIANT...] serve ARGS...`` applies the named
patches, then runs the real ``executor.cli.main``. Run beside the unpatched executor through
``cmd:``, e.g.::

    python -m bench --fire-only \\
        --executors "trio,uvloop,cmd:.venv/bin/python -m bench.experiments.variants idle-lane serve"

so that docs/performance/notebook/ can say what a change to the fire path would buy, measured in the
same run, before anyone changes the executor. Variants:

- ``idle-lane``: the shadow lane takes a queued shadow order only when every other task is blocked
  (``trio.testing.wait_all_tasks_blocked``), so reading, acking and real fires always go first.
  Measured against the lane that signed on the loop (one shadow signature per scheduler pass, so
  a burst's later frames each waited behind one); with ``--shadow-signing process`` (main's
  default since) the signature is off the loop anyway and this variant only delays shadows.
  Main's lane has since adopted the idea in a bounded form (idle for 0.2 ms, at most 50 ms late:
  ``executor.exchange.orders.shadow_lane``); this variant waits without a bound or a cushion.
- ``httpx-orders``, ``h11-responses``, ``task-writes``: the order transport's
  (``bench.experiments.transport_variants``, which says what each does).
- ``json-rows`` was here until the writer adopted it (executor/recording/sqlite_writer.py,
  2026-12-01); ``chunked-rows`` is now the other side of that A/B: the writer as it was before,
  multi-row INSERTs of 128, 64, ... rows whose every value is bound from Python.
- ``switch-1ms``, ``switch-0.2ms``: ``sys.setswitchinterval`` (CPython's default is 5 ms): how
  long a thread waiting for the GIL waits before it asks the holder to let go. The writer thread
  retakes the GIL after each SQLite step; with the event loop busy, that wait is the interval.
- ``acks-per-frame``: every ack in its own ``send`` (``ACK_JOIN_FRAMES`` = 1), as from 2026-12-01
  until pipelined acks were joined (2026-12-01); ``acks-per-batch``: one joined ``send`` per
  batch (``ACK_JOIN_FRAMES`` = ``MAX_BATCH_FRAMES``), close to the code before 2026-12-01 (which
  also sent a real wake's ack joined).
- ``no-shadow-hold``: a batch's shadow fires start right after its rows, even while more frames
  are waiting (``executor.wire.handoff`` holds them): the burst's A/B.
- ``flush-all``: once the connection has caught up, every held shadow wake is started in one go,
  as until 2026-12-02 (the product starts them one at a time and goes back to reading as soon as
  a frame is waiting): the burst's A/B of starting them one at a time.
- ``eager-refill``: the signature pool makes a spare again as soon as one is taken, as until
  2026-12-02 (the product waits for an idle loop while real fires still have their reserve):
  the burst's A/B of deferring the worker's RSA.
- ``shadows-ignore-others``: a connection starting its held shadow wakes never hands the loop to
  the other connections between starts, as until 2026-12-02 (evening): the A/B of what taking
  turns costs at saturation with four connections.
- ``all-before-write``: a real order's path before its first byte as it was until 2026-12-02:
  the risk gate's attempt, a freshly drawn id, the ``pending`` row built, recorded in the intent
  journal and queued, all before the body is built and the request written (DISPATCH.md §4's
  order). The product now does only the id (drawn ahead), the record (its fields, without the
  row) and the write first, and the attempt, the row's queueing and the next ids right after.
- ``no-intent``: real orders are sent without their intent record (the pending row appended to
  the intent journal with one ``os.write`` before the first byte leaves, issue 21): what the
  record costs ``detect_wire`` is this variant against the product, in one run.
- ``timed-intent``: the product, with each intent record's own duration (``perf_counter_ns``
  around ``Telemetry.record_intent``: the whole of what it adds to ``detect_wire``, since it never
  awaits) appended, one integer of ns a line, to the file ``$TIMED_INTENT_OUT`` names, at exit.
- ``pipelined-writer`` was here until the consumer adopted it (executor/recording/consumer.py,
  2026-12-01): its A/B is in docs/performance/notebook/.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final

import trio
import trio.testing

from bench.experiments.transport_variants import TRANSPORT_VARIANTS
from executor.clock import wall_ms
from executor.exchange.orders import shadow_lane


def _patch_idle_lane() -> None:
    lane_log = shadow_lane.log

    async def run(
        self: shadow_lane.ShadowLane,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        try:
            async for job in self._receive:
                # Sign only when nothing else can run: frames, acks and real fires go first.
                await trio.testing.wait_all_tasks_blocked()
                try:
                    await self._client.place_order(job.body, job.stamps.order, dry_run=True)
                    self.signed += 1
                except Exception:
                    lane_log.exception("shadow fire failed to sign")
                finally:
                    job.finish()
        finally:
            self._finish_unsigned()
            self._receive.close()

    shadow_lane.ShadowLane.run = run  # type: ignore[method-assign]


def _patch_no_shadow_hold() -> None:
    from executor.wire.handoff import FireHandoff

    def start_shadows(self: FireHandoff, **_: Callable[[], bool]) -> bool:
        self.flush()
        return False

    FireHandoff.start_shadows = start_shadows  # type: ignore[method-assign]


def _patch_flush_all() -> None:
    from executor.wire.handoff import MAX_DEFERRED_SHADOWS, FireHandoff

    def start_shadows(
        self: FireHandoff, *, more_frames_waiting: Callable[[], bool], **_: Callable[[], bool]
    ) -> bool:
        if self.deferred and (self.deferred >= MAX_DEFERRED_SHADOWS or not more_frames_waiting()):
            self.flush()
        return False

    FireHandoff.start_shadows = start_shadows  # type: ignore[method-assign]


def _patch_shadows_ignore_others() -> None:
    from executor.wire import session

    session.another_connection_waiting = lambda connections, this: False  # type: ignore[attr-defined]


def _patch_eager_refill() -> None:
    from executor.exchange.orders.presign import SignaturePool

    def idle_wait_s(self: SignaturePool) -> float:
        return 0.0

    SignaturePool._idle_wait_s = idle_wait_s  # type: ignore[method-assign]


def _patch_all_before_write() -> None:
    from executor.exchange.orders import dispatcher
    from executor.exchange.orders.rows import order_row
    from executor.recording.orders.intent_journal import row_record_fields
    from executor.recording.rows import OrderRowKind

    def begin(self: dispatcher.OrderDispatcher, order: Any, stamps: Any) -> dispatcher.StartedOrder:
        if order.ticket is not None:
            order.ticket.sending()
        started = dispatcher.StartedOrder(order, self.prepare(order.request), wall_ms(), stamps)
        try:
            pending = order_row(
                started.prepared, self.policy, OrderRowKind.PENDING, started.requested_at_ms
            )
            self._record_intent(row_record_fields(pending))
            self.sink.record_pending(pending)
            started.body, started.in_flight = self._build_and_start(started.prepared, stamps)
        except Exception as error:
            started.failure = error
        return started

    dispatcher.OrderDispatcher.begin = begin  # type: ignore[method-assign]


def _patch_chunked_rows() -> None:
    import sqlite3

    from executor.recording import sqlite_writer
    from executor.recording.rows import LatencyRow

    correlation = "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms) VALUES (?, ?)"
    event = (
        "INSERT INTO latency_events"
        " (correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)"
        " VALUES (?, ?, ?, ?, ?, ?)"
    )
    statements = {
        size: (
            correlation + ", (?, ?)" * (size - 1),
            event + ", (?, ?, ?, ?, ?, ?)" * (size - 1),
        )
        for size in _CHUNK_ROWS
    }

    def insert_rows(
        connection: sqlite3.Connection,
        rows: list[LatencyRow],
        now_ms: int,
        between: Callable[[], None] | None = None,  # the old writer never yielded
    ) -> None:
        start = 0
        for size in _CHUNK_ROWS:
            while len(rows) - start >= size:
                chunk = rows[start : start + size]
                correlations_sql, events_sql = statements[size]
                connection.execute(correlations_sql, [v for row in chunk for v in (row[0], now_ms)])
                connection.execute(events_sql, [value for row in chunk for value in row])
                start += size

    sqlite_writer._insert_rows = insert_rows


_CHUNK_ROWS: Final = (128, 64, 32, 16, 8, 4, 2, 1)
"""The landed writer's multi-row INSERT sizes before 2026-12-01 (rows)."""


def _patch_acks_per_frame() -> None:
    from executor.wire import batch

    batch.ACK_JOIN_FRAMES = 1  # type: ignore[misc]


def _patch_acks_per_batch() -> None:
    from executor.wire import batch

    batch.ACK_JOIN_FRAMES = batch.MAX_BATCH_FRAMES  # type: ignore[misc]


def _switch_interval(seconds: float) -> Callable[[], None]:
    def patch() -> None:
        sys.setswitchinterval(seconds)

    return patch


def _patch_no_intent() -> None:
    from executor.telemetry import Telemetry

    def record_intent(self: Telemetry, fields: object) -> None:
        """No intent record: the order goes without one."""

    Telemetry.record_intent = record_intent  # type: ignore[method-assign]


def _patch_timed_intent() -> None:
    import atexit
    import os
    import time

    from executor.recording.orders.intent_journal import RecordFields
    from executor.telemetry import Telemetry

    durations: list[int] = []
    record = Telemetry.record_intent

    def timed(self: Telemetry, fields: RecordFields) -> None:
        started = time.perf_counter_ns()
        try:
            record(self, fields)
        finally:
            durations.append(time.perf_counter_ns() - started)

    def write_out() -> None:
        path = os.environ.get("TIMED_INTENT_OUT")
        if path and durations:
            with open(path, "a", encoding="ascii") as out:
                out.writelines(f"{value}\n" for value in durations)

    Telemetry.record_intent = timed  # type: ignore[method-assign]
    atexit.register(write_out)


VARIANTS: Final[dict[str, Callable[[], None]]] = {
    "no-intent": _patch_no_intent,
    "timed-intent": _patch_timed_intent,
    "switch-1ms": _switch_interval(0.001),
    "switch-0.2ms": _switch_interval(0.0002),
    "chunked-rows": _patch_chunked_rows,
    "acks-per-frame": _patch_acks_per_frame,
    "acks-per-batch": _patch_acks_per_batch,
    "idle-lane": _patch_idle_lane,
    **TRANSPORT_VARIANTS,
    "no-shadow-hold": _patch_no_shadow_hold,
    "all-before-write": _patch_all_before_write,
    "flush-all": _patch_flush_all,
    "shadows-ignore-others": _patch_shadows_ignore_others,
    "eager-refill": _patch_eager_refill,
}


def main(argv: list[str] | None = None) -> int:
    """Apply the variants named first, then run ``executor`` with the remaining arguments."""
    args = sys.argv[1:] if argv is None else argv
    if not args or any(name not in VARIANTS for name in args[0].split("+")):
        print(
            "usage: python -m bench.experiments.variants"
            f" {{{'|'.join(VARIANTS)}}}[+...] serve ARGS",
            file=sys.stderr,
        )
        return 2
    for name in args[0].split("+"):
        VARIANTS[name]()
    from executor.cli import main as executor_main

    return executor_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
