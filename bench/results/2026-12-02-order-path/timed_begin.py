"""``executor serve`` with each step of ``OrderDispatcher.begin`` timed (2026-12-02, RESULTS.md).

An experiment, not product: run from the repository root, as a ``cmd:`` executor of the fire
bench, e.g. ``cmd:env TIMED_BEGIN_OUT=steps.txt PYTHONPATH=. .venv/bin/python
bench/results/2026-12-02-order-path/timed_begin.py serve``; each real order appends one line of
nanoseconds at exit. ``BEGIN=before`` times the order as it was before 33c775f (the risk gate's
attempt, a fresh id, the row, the record, the queue, then the write: ``all-before-write``);
otherwise the product's order (the id drawn ahead, the record's fields, the write, then the
attempt, the row, the queue and the next ids). The wrapper copies ``begin`` step for step with a
``perf_counter_ns`` between steps (each read costs ~0.1 µs hot, several cold).
"""

from __future__ import annotations

import atexit
import itertools
import os
import sys
import time
from typing import Any

from executor.clock import wall_ms
from executor.exchange.orders import dispatcher
from executor.exchange.orders.rows import order_row, pending_record
from executor.recording.intent_journal import row_record_fields
from executor.recording.rows import OrderRowKind

STEPS_BEFORE = ("risk_attempt", "prepare_id", "started", "order_row", "intent", "queue", "write")
STEPS_NOW = (
    "prepare_id",
    "started",
    "fields",
    "intent",
    "write",
    "risk_attempt",
    "order_row",
    "queue",
    "draw_ahead",
)
lines: list[tuple[int, ...]] = []
clock = time.perf_counter_ns


def begin_before(self: Any, order: Any, stamps: Any) -> Any:
    t = [clock()]
    if order.ticket is not None:
        order.ticket.sending()
    t.append(clock())
    prepared = self.prepare(order.request)
    t.append(clock())
    started = dispatcher.StartedOrder(order, prepared, wall_ms(), stamps)
    t.append(clock())
    pending = order_row(prepared, self.policy, OrderRowKind.PENDING, started.requested_at_ms)
    t.append(clock())
    self._record_intent(row_record_fields(pending))
    t.append(clock())
    self.sink.record_pending(pending)
    t.append(clock())
    started.body, started.in_flight = self._build_and_start(prepared, stamps)
    t.append(clock())
    lines.append(tuple(b - a for a, b in itertools.pairwise(t)))
    return started


def begin_now(self: Any, order: Any, stamps: Any) -> Any:
    t = [clock()]
    prepared = self.prepare(order.request, real=True)
    t.append(clock())
    started = dispatcher.StartedOrder(order, prepared, wall_ms(), stamps)
    t.append(clock())
    fields = pending_record(prepared, self.policy, started.requested_at_ms)
    t.append(clock())
    self._record_intent(fields)
    t.append(clock())
    started.body, started.in_flight = self._build_and_start(prepared, stamps)
    t.append(clock())
    if order.ticket is not None:
        order.ticket.sending()
    t.append(clock())
    pending = order_row(prepared, self.policy, OrderRowKind.PENDING, started.requested_at_ms)
    t.append(clock())
    self.sink.record_pending(pending)
    t.append(clock())
    self.ids.draw_ahead()
    t.append(clock())
    lines.append(tuple(b - a for a, b in itertools.pairwise(t)))
    return started


def write_out() -> None:
    path = os.environ.get("TIMED_BEGIN_OUT")
    if path and lines:
        steps = STEPS_BEFORE if os.environ.get("BEGIN") == "before" else STEPS_NOW
        with open(path, "a", encoding="ascii") as out:
            out.write(" ".join(steps) + "\n")
            out.writelines(" ".join(map(str, line)) + "\n" for line in lines)


if __name__ == "__main__":
    before = os.environ.get("BEGIN") == "before"
    dispatcher.OrderDispatcher.begin = begin_before if before else begin_now  # type: ignore[method-assign]
    atexit.register(write_out)
    from executor.cli import main

    sys.exit(main(sys.argv[1:]))
