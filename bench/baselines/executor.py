"""The asyncio baseline executor: the reference's loop shape on asyncio streams, own process.

Per frame, in the reference's order: ``readexactly(4)``, ``readexactly(n)``, stamp, decode (this
project's strict decoder, so the decoder is not a difference between executors), ``writer.write``
of the ack then ``await writer.drain()``, stop the clock, hand the ``wake_recv`` row to the writer
thread, then ``asyncio.create_task`` the fire: a no-op dispatch, or, when ``KALSHI_API_KEY_ID`` and
``KALSHI_PRIVATE_KEY_PATH`` are set, the reference's signed order path over aiohttp
(``bench.baselines.fire``). Nothing is tuned away: the selector
transport's 256 KiB read buffer stays, because that is what the reference's shape costs.

Run: ``python -m bench.baselines.executor --socket S --telemetry-db D [--loop asyncio|uvloop]``.
SIGTERM or SIGINT stops accepting, closes connections, writes every queued row and prints the
counters in the C++ port's format on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
from typing import Final

from bench.baselines.fire import (
    BaselineConfigError,
    BaselineExchangeConfig,
    BaselineFirePath,
    config_from_env,
    open_fire_path,
)
from bench.baselines.rowwriter import RowWriter
from executor.wire.protocol import (
    DecodeError,
    FrameTooLargeError,
    WakeMessage,
    decode_wake_message,
    encode_accepted_ack,
    encode_rejected_ack,
    parse_frame_length,
)

METADATA_DRY_RUN: Final = '{"dry_run": true}'
METADATA_REAL: Final = '{"dry_run": false}'


@dataclasses.dataclass
class ServerCounters:
    """Frames seen by the baseline, in the keys the C++ port prints."""

    frames: int = 0
    accepted: int = 0
    rejected: int = 0
    fired: int = 0
    unacked: int = 0


async def dispatch(message: WakeMessage, counters: ServerCounters) -> None:
    """The no-op fire: the reference benchmark's fake dispatcher places nothing."""
    counters.fired += 1


class BaselineExecutor:
    """One Unix-socket server whose connection handler is the reference's read loop."""

    def __init__(self, writer: RowWriter, exchange: BaselineExchangeConfig | None = None) -> None:
        self.counters = ServerCounters()
        self.fire_path: BaselineFirePath | None = None
        self._exchange = exchange
        self._rows = writer
        self._fires: set[asyncio.Task[None]] = set()
        self._connections: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection until EOF, an oversize prefix, or a vanished peer."""
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._frames(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, FrameTooLargeError):
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    async def _frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counters = self.counters
        while True:
            prefix = await reader.readexactly(4)
            body = await reader.readexactly(parse_frame_length(prefix))
            started_ns = time.perf_counter_ns()
            received_at_ms = time.time_ns() // 1_000_000
            counters.frames += 1
            try:
                message = decode_wake_message(body)
            except DecodeError as error:
                counters.rejected += 1
                writer.write(encode_rejected_ack(str(error), received_at_ms))
                await writer.drain()
                continue
            counters.accepted += 1
            writer.write(encode_accepted_ack(message.correlation_id, received_at_ms))
            try:
                await writer.drain()
            except ConnectionError:
                counters.unacked += 1
                raise
            ended_ns = time.perf_counter_ns()
            self._rows.record(
                (
                    message.correlation_id,
                    "wake_recv",
                    received_at_ms,
                    time.time_ns() // 1_000_000,
                    (ended_ns - started_ns) / 1_000_000,
                    METADATA_DRY_RUN if message.dry_run else METADATA_REAL,
                )
            )
            if self.fire_path is not None:
                fire = asyncio.create_task(self.fire_path.fire(message, (started_ns, ended_ns)))
            else:
                fire = asyncio.create_task(dispatch(message, counters))
            self._fires.add(fire)
            fire.add_done_callback(self._fires.discard)

    async def serve(self, socket_path: str) -> None:
        """Listen on ``socket_path`` (mode 0600) until SIGTERM or SIGINT, then shut down."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        async with contextlib.AsyncExitStack() as stack:
            if self._exchange is not None:
                self.fire_path = await stack.enter_async_context(
                    open_fire_path(self._exchange, self._rows)
                )
            await self._serve(socket_path, stop)

    async def _serve(self, socket_path: str, stop: asyncio.Event) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        old_umask = os.umask(0o077)
        try:
            server = await asyncio.start_unix_server(self.handle, path=socket_path)
        finally:
            os.umask(old_umask)
        async with server:
            await stop.wait()
            server.close()
            for connection in list(self._connections):
                connection.cancel()
            await asyncio.gather(*self._connections, *self._fires, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.baselines.executor",
        description="asyncio baseline executor with the reference's loop shape (benchmark only)",
    )
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument("--telemetry-db", required=True, help="SQLite file for latency_events")
    parser.add_argument(
        "--loop", choices=("asyncio", "uvloop"), default="asyncio", help="event loop to run on"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the baseline until a signal; print the counters; exit 0."""
    args = _parse_args(argv)
    try:
        exchange = config_from_env(os.environ)
    except BaselineConfigError as error:
        print(f"bench.baselines.executor: {error}", file=sys.stderr)
        return 2
    rows = RowWriter(args.telemetry_db)
    executor = BaselineExecutor(rows, exchange)
    try:
        if args.loop == "uvloop":
            import uvloop

            uvloop.run(executor.serve(args.socket))
        else:
            asyncio.run(executor.serve(args.socket))
    except BaselineConfigError as error:
        print(f"bench.baselines.executor: {error}", file=sys.stderr)
        return 2
    finally:
        rows.close()
    c, t = executor.counters, rows.counters
    fired, refused_price, dispatch_errors = c.fired, 0, 0
    if executor.fire_path is not None:
        f = executor.fire_path.counters
        fired, refused_price, dispatch_errors = f.fired, f.refused_price, f.dispatch_errors
        if f.last_error:
            print(f"bench.baselines.executor: last dispatch error: {f.last_error}", file=sys.stderr)
    print(
        f"frames={c.frames} accepted={c.accepted} rejected={c.rejected} fired={fired}"
        f" refused_price={refused_price} refused_kill_switch=0 unacked={c.unacked}"
        f" fires_cancelled=0 dispatch_errors={dispatch_errors}",
        file=sys.stderr,
    )
    print(
        f"telemetry rows_written={t.rows_written} dropped_ring_full={t.dropped_ring_full}"
        f" dropped_oversized_id=0 dropped_write_failed={t.dropped_write_failed}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
