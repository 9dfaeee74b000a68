"""Experiments, not product: ``executor serve`` with one change patched in, for A/B runs.

``python -m bench.scenarios.variants VARIANT[+VARIANT...] serve ARGS...`` applies the named
patches, then runs the real ``executor.cli.main``. Run beside the unpatched executor through
``cmd:``, e.g.::

    python -m bench --fire-only \\
        --executors "trio,uvloop,cmd:.venv/bin/python -m bench.scenarios.variants idle-lane serve"

so that RESULTS.md can say what a change to the fire path would buy, measured in the same run,
before anyone changes the executor. Variants:

- ``idle-lane``: the shadow lane takes a queued shadow order only when every other task is blocked
  (``trio.testing.wait_all_tasks_blocked``), so reading, acking and real fires always go first.
  Measured against the lane that signed on the loop (one shadow signature per scheduler pass, so
  a burst's later frames each waited behind one); with ``--shadow-signing process`` (main's
  default since) the signature is off the loop anyway and this variant only delays shadows.
  Main's lane has since adopted the idea in a bounded form (idle for 0.2 ms, at most 50 ms late:
  ``executor.exchange.shadow_lane``); this variant waits without a bound or a cushion.
- ``httpx-orders``: orders go through the httpx client again, the way the transport sent them
  before the order connections (2026-12-01): an ``httpx.Request(...)`` from headers merged once
  (the former ``direct-request`` variant, which that transport had adopted), signed inline. It
  writes no ``wire`` stamp (httpx does not say when its last byte left), so it has no
  ``detect_wire`` rows; its ``detect_fire`` and ``dispatch_ack`` compare with the product's.
- ``json-rows``: the telemetry writer inserts a batch's run of latency rows with two statements
  that read one JSON array (``json_each``, the array built by orjson in the worker thread), instead
  of multi-row INSERTs of 128, 64, ... rows whose every value is bound from Python. The work per
  row then happens inside ``sqlite3_step``, without the GIL (issue 17's lead); a batch takes the
  GIL back four times (BEGIN, two INSERTs, COMMIT) instead of about sixteen.
- ``no-intent``: real orders are sent without their intent record (the pending row appended to
  the intent journal with one ``os.write`` before the first byte leaves, issue 21): what the
  record costs ``detect_wire`` is this variant against the product, in one run.
- ``timed-intent``: the product, with each intent record's own duration (``perf_counter_ns``
  around ``Telemetry.record_intent``: the whole of what it adds to ``detect_wire``, since it never
  awaits) appended, one integer of ns a line, to the file ``$TIMED_INTENT_OUT`` names, at exit.
- ``pipelined-writer`` was here until the consumer adopted it (executor/recording/consumer.py,
  2026-12-01): its A/B is in docs/RESULTS.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final

import httpx
import trio
import trio.testing

from executor.clock import stamp_ns, wall_ms
from executor.exchange import shadow_lane
from executor.exchange import transport as exchange


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


def _patch_httpx_orders() -> None:
    async def order_attempt(
        self: exchange.ExchangeClient, body: bytes, stamps: exchange.OrderStamps, *, dry_run: bool
    ) -> dict[str, Any]:
        stamps.reset()
        stamps.attempts += 1
        if not dry_run:
            await self.limiter.acquire(exchange.TOKENS_PER_ORDER)
        cached = getattr(self, "_bench_direct", None)
        if cached is None:
            # Once per client: the URL and the client's default headers, merged the way
            # build_request would, and the timeout extension.
            url = self.rest._http.base_url.join(exchange.ORDER_PATH)
            defaults = list(self.rest._http.headers.multi_items())
            timeout = httpx.Timeout(
                exchange.ORDER_TIMEOUT_S, connect=exchange.ORDER_CONNECT_TIMEOUT_S
            )
            extensions = {"timeout": timeout.as_dict()}
            cached = (url, defaults, extensions)
            self._bench_direct = cached  # type: ignore[attr-defined]
        url, defaults, extensions = cached
        timestamp = str(wall_ms())
        stamps.sign_start_ns = stamp_ns()
        if dry_run and self.shadow_signer is not None:
            signature = await self.shadow_signer(timestamp, "POST", exchange.ORDER_PATH)
        else:
            signature = self._signer.sign(timestamp, "POST", exchange.ORDER_PATH)
        stamps.sign_end_ns = stamp_ns()
        stamps.signature = "inline"
        headers = [*defaults, *self.rest._headers(timestamp, signature, with_body=True).items()]
        request = httpx.Request("POST", url, content=body, headers=headers, extensions=extensions)
        stamps.sent_ns = stamp_ns()
        if dry_run:
            return {}
        response = await self.rest._send(request, exchange.ORDER_TIMEOUT_S)
        stamps.ack_ns = stamp_ns()
        return exchange.parse_response(response)

    exchange.ExchangeClient._order_attempt = order_attempt  # type: ignore[method-assign]


_JSON_CORRELATIONS: Final = (
    "INSERT OR IGNORE INTO correlations (correlation_id, created_at_ms)"
    " SELECT value ->> 0, ? FROM json_each(?) ORDER BY key"
)
_JSON_EVENTS: Final = (
    "INSERT INTO latency_events"
    " (correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json)"
    " SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5"
    " FROM json_each(?) ORDER BY key"
)


def _patch_json_rows() -> None:
    import sqlite3

    import orjson

    from executor.recording import sqlite_writer
    from executor.recording.rows import LatencyRow

    def insert_rows(connection: sqlite3.Connection, rows: list[LatencyRow], now_ms: int) -> None:
        text = orjson.dumps(rows, default=tuple).decode()  # TEXT: a BLOB is JSONB to SQLite 3.45+
        connection.execute(_JSON_CORRELATIONS, (now_ms, text))
        connection.execute(_JSON_EVENTS, (text,))

    sqlite_writer._insert_rows = insert_rows


def _patch_no_intent() -> None:
    from executor.telemetry import Telemetry

    def record_intent(self: Telemetry, row: object) -> None:
        """No intent record: the order goes without one."""

    Telemetry.record_intent = record_intent  # type: ignore[method-assign]


def _patch_timed_intent() -> None:
    import atexit
    import os
    import time

    from executor.recording.rows import OrderRow
    from executor.telemetry import Telemetry

    durations: list[int] = []
    record = Telemetry.record_intent

    def timed(self: Telemetry, row: OrderRow) -> None:
        started = time.perf_counter_ns()
        try:
            record(self, row)
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
    "json-rows": _patch_json_rows,
    "idle-lane": _patch_idle_lane,
    "httpx-orders": _patch_httpx_orders,
}


def main(argv: list[str] | None = None) -> int:
    """Apply the variants named first, then run ``executor`` with the remaining arguments."""
    args = sys.argv[1:] if argv is None else argv
    if not args or any(name not in VARIANTS for name in args[0].split("+")):
        print(
            f"usage: python -m bench.scenarios.variants {{{'|'.join(VARIANTS)}}}[+...] serve ARGS",
            file=sys.stderr,
        )
        return 2
    for name in args[0].split("+"):
        VARIANTS[name]()
    from executor.cli import main as executor_main

    return executor_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
