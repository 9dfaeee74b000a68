"""The interpreter's floor on the frames side: this executor's per-frame code, without Trio.

Benchmark only, and not an executor: no kill switch, no exchange, no fire path beyond the
decision, no shutdown grace. It answers one question of issue 24 (docs/performance/plan/, addendum
"the interpreter's floor"): of the gap between ``executor serve`` and the C++ port at saturation,
how much is the per-frame work the protocol asks for, done in Python, and how much is what Trio and
the service's structure add around it.

What it runs per frame is this executor's own code, called the way the connection loop calls it:
``take_buffered_frames`` (the stamps, the strict decode, the ack's encoding, the joined
non-blocking ``send``s: ``executor.wire.batch``), ``wake_recv_row`` for each acked frame, and,
after the rows, ``wake_message_of`` and ``Decider.decide`` for each wake (what ``executor serve``
does with a fire when it has no exchange). What it leaves out: tasks, the scheduler's passes and
checkpoints, the memory channel (``queue.SimpleQueue.put`` instead of ``send_nowait``, bounded at
the channel's capacity by its size, dropping and counting past it), the consumer task and its
``to_thread`` hops. Everything runs on one thread in a ``selectors`` loop over non-blocking
sockets, but for a writer thread that commits what is queued, at most ``BATCH_ROWS`` a
transaction, through this executor's ``write_batch``. The garbage collector is set as
``executor serve`` sets it (``executor.runtime.gc_settings.settle_heap``) before the socket listens.

Run: ``python -m bench.baselines.floor --socket S --telemetry-db D``. SIGTERM or SIGINT stops it:
connections are closed, every queued row is written, and the counters are printed on stderr as
``key=value`` pairs (what ``bench.harness.processes.parse_counters`` reads).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import queue
import select
import selectors
import signal
import socket
import sqlite3
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Final

from executor.decide.decision import Decider, Order
from executor.recording.database import TelemetryOpenError, close_database, open_database
from executor.recording.rows import LatencyRow, wake_recv_row
from executor.recording.sqlite_writer import write_batch
from executor.runtime.gc_settings import settle_heap
from executor.wire.batch import (
    PEER_GONE_ERRORS,
    Batch,
    FrameCounters,
    PeerGone,
    close_spans_sent,
    next_complete_frame,
    take_buffered_frames,
)
from executor.wire.connection import Connection
from executor.wire.protocol import (
    MAX_FRAME_BYTES,
    PREFIX_BYTES,
    FrameTooLargeError,
    parse_frame_length,
    wake_message_of,
)
from executor.wire.unixsocket import PreparedSocket

QUEUE_CAPACITY: Final = 8192
"""Rows queued for the writer before one is dropped (rows): the Trio executor's channel capacity."""

BATCH_ROWS: Final = 500
"""Most rows committed in one transaction: the Trio executor's (TELEMETRY.md)."""

STOP_POLL_S: Final = 0.05
"""Longest the loop waits in ``select`` before it looks at the stop flag (s)."""


@dataclasses.dataclass
class FloorCounters:
    """What the floor did, printed at exit (the frame counters are ``FrameCounters``)."""

    decided: int = 0
    orders: int = 0
    rows_written: int = 0
    dropped_ring_full: int = 0
    dropped_write_failed: int = 0


class RowQueue:
    """The rows between the loop and the writer thread: a ``SimpleQueue`` bounded by its size."""

    def __init__(self, counters: FloorCounters, capacity: int = QUEUE_CAPACITY) -> None:
        self._queue: queue.SimpleQueue[LatencyRow | None] = queue.SimpleQueue()
        self._capacity = capacity
        self._counters = counters

    def record(self, row: LatencyRow) -> None:
        """Queue ``row``, or drop and count it when ``capacity`` rows are already queued."""
        if self._queue.qsize() >= self._capacity:
            self._counters.dropped_ring_full += 1
        else:
            self._queue.put(row)

    def close(self) -> None:
        """Tell the writer that no row follows the ones queued."""
        self._queue.put(None)

    def write_all(self, connection: sqlite3.Connection, database: Path) -> None:
        """The writer thread: commit queued rows in batches of up to ``BATCH_ROWS`` until closed;
        then close ``connection`` (the telemetry file ``database``)."""
        counters = self._counters
        take, take_now = self._queue.get, self._queue.get_nowait
        try:
            closed = False
            while not closed:
                first = take()
                if first is None:
                    break
                rows = [first]
                while len(rows) < BATCH_ROWS:
                    try:
                        row = take_now()
                    except queue.Empty:
                        break
                    if row is None:
                        closed = True
                        break
                    rows.append(row)
                outcome = write_batch(connection, list(rows))
                counters.rows_written += outcome.rows_written
                counters.dropped_write_failed += len(outcome.failures)
        finally:
            close_database(connection, database)


class FloorServer:
    """The loop: accept, read, and hand each connection's buffered frames to the batch code."""

    def __init__(self, rows: RowQueue, counters: FloorCounters) -> None:
        self.frames = FrameCounters()
        self.counters = counters
        self._rows = rows
        self._decider = Decider()
        self._batch = Batch()
        self._selector = selectors.DefaultSelector()
        self._stop = False

    def stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """Ask the loop to end (a signal handler)."""
        self._stop = True

    def serve(self, listener: socket.socket) -> None:
        """Serve every connection until :meth:`stop`; then close them all."""
        listener.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ, None)
        try:
            while not self._stop:
                for key, _ in self._selector.select(STOP_POLL_S):
                    if key.data is None:
                        self._accept(listener)
                    else:
                        self._read(*key.data)
        finally:
            for key in list(self._selector.get_map().values()):
                if key.data is not None:
                    self._close(key.data[0])
            self._selector.close()

    def _accept(self, listener: socket.socket) -> None:
        with contextlib.suppress(BlockingIOError):
            sock, _ = listener.accept()
            sock.setblocking(False)
            stats = {"frames": 0, "accepted": 0, "rejected": 0}
            self._selector.register(sock, selectors.EVENT_READ, (Connection(sock), stats))

    def _close(self, peer: Connection) -> None:
        self._selector.unregister(peer.sock)
        peer.sock.close()

    def _read(self, peer: Connection, stats: dict[str, int]) -> None:
        peer.make_room(PREFIX_BYTES + MAX_FRAME_BYTES)
        try:
            received = peer.sock.recv_into(peer.view[peer.end :])
        except BlockingIOError:
            return
        except PEER_GONE_ERRORS:
            received = 0
        if received == 0:
            self._close(peer)
            return
        peer.end += received
        try:
            keep = self._take_frames(peer, stats)
        except PeerGone:
            keep = False
        if not keep:
            self._close(peer)

    def _take_frames(self, peer: Connection, stats: dict[str, int]) -> bool:
        """Every whole frame buffered, batch after batch; False when the connection must close."""
        batch = self._batch
        while True:
            length = next_complete_frame(peer)
            if length < 0:
                if _oversized_prefix(peer):
                    self.frames.oversized_frames += 1
                    return False
                return True
            try:
                oversized = take_buffered_frames(peer, length, batch, self.frames, stats)
                if batch.held:
                    _send_rest(peer, batch)
            finally:
                self._finish(batch)
            if oversized:
                self.frames.oversized_frames += 1
                return False

    def _finish(self, batch: Batch) -> None:
        """The batch's rows, then its decisions (the connection loop's order without an
        exchange, where a fire is only its decision); ``unacked`` for what did not go out."""
        self.frames.unacked += sum(1 for message, *_ in batch.held if message is not None)
        batch.held.clear()
        batch.held_acks.clear()
        batch.short_ack = b""
        batch.short_sent = 0
        ended_at_ms = time.time_ns() // 1_000_000
        record = self._rows.record
        for decoded, stamp_ns, received_at_ms, done_ns in batch.acked:
            record(
                wake_recv_row(
                    decoded.correlation_id,
                    received_at_ms,
                    ended_at_ms,
                    done_ns - stamp_ns,
                    decoded.dry_run,
                )
            )
        decide = self._decider.decide
        counters = self.counters
        for decoded, *_ in batch.acked:
            counters.decided += 1
            if isinstance(decide(wake_message_of(decoded)), Order):
                counters.orders += 1
        batch.acked.clear()
        batch.rejected.clear()


def _oversized_prefix(peer: Connection) -> bool:
    if peer.end - peer.start < PREFIX_BYTES:
        return False
    try:
        parse_frame_length(peer.view[peer.start : peer.start + PREFIX_BYTES])
    except FrameTooLargeError:
        return True
    return False


def _send_rest(peer: Connection, batch: Batch) -> None:
    """The acks the kernel did not take whole: wait for writability (blocking) and send the rest;
    each span closes when its ack is whole in the kernel (as ``send_short_ack_rest``)."""
    while batch.held:
        select.select([], [peer.sock], [])
        batch.short_sent += peer.send_now(memoryview(batch.short_ack)[batch.short_sent :])
        close_spans_sent(batch, time.perf_counter_ns())


def _listen(path: str) -> socket.socket:
    """Listen on ``path`` as ``executor serve`` does: the socket listens before its path exists,
    so a client that sees the path can connect (``executor.wire.unixsocket.PreparedSocket``)."""
    return PreparedSocket(Path(path)).publish_socket()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.baselines.floor",
        description="this executor's per-frame code without Trio (benchmark only)",
    )
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument("--telemetry-db", required=True, help="SQLite file for latency_events")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT, write every queued row, print the counters; exit 0."""
    args = _parse_args(argv)
    database = Path(args.telemetry_db)
    counters = FloorCounters()
    rows = RowQueue(counters)
    try:
        connection, _ = open_database(database)  # fails here, before listening
    except TelemetryOpenError as error:
        print(f"bench.baselines.floor: {error}", file=sys.stderr)
        return 2
    writer = threading.Thread(
        target=rows.write_all, args=(connection, database), name="floor-writer"
    )
    writer.start()
    server = FloorServer(rows, counters)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, server.stop)
    settle_heap()  # the collector as ``executor serve`` sets it (``--gc tuned``)
    listener = _listen(args.socket)
    try:
        server.serve(listener)
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.socket)
        rows.close()
        writer.join()
    f = server.frames
    print(
        f"frames={f.frames} accepted={f.accepted} rejected={f.rejected} unacked={f.unacked}"
        f" oversized_frames={f.oversized_frames} decided={counters.decided}"
        f" orders={counters.orders} rows_written={counters.rows_written}"
        f" dropped_ring_full={counters.dropped_ring_full}"
        f" dropped_write_failed={counters.dropped_write_failed}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
