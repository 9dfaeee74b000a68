"""The look-ahead in isolation: a burst written in one ``sendall`` (100 shadows, a real wake, 100
shadows) to ``serve_frames`` over a socket pair, timed from the write to the real wake's fire
start, with ``Connection.real_wake_ahead`` as shipped and with it answering False (the code before
48a6e68). Rows go to a list (no channel); shadow fires are not started before the real one in
either case (held while frames wait), so the difference is the batches' rows and scheduler passes.

  PYTHONPATH=. buffered_burst.py [ROUNDS]   (pin it with taskset -c 1 for the pinned figure)

Runs on 48a6e68 only: the look-ahead was reverted after these measurements (ae02ae5).
"""

import socket
import statistics
import sys
import time
from typing import cast

import trio

from executor.telemetry import Telemetry
from executor.wire.connection import Connection, FrameCounters, serve_frames
from executor.wire.protocol import WakeMessage, encode_frame
from tests.support.inprocess import make_wake


class _Rows:
    def __init__(self) -> None:
        self.rows: list[object] = []

    def record(self, row: object) -> None:
        self.rows.append(row)


async def one_burst(look: bool, burst: bytes) -> int:
    """Nanoseconds from the burst's write to the real wake's fire start."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setblocking(False)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    connection = Connection(ours)
    if not look:
        connection.real_wake_ahead = lambda: False  # type: ignore[method-assign]
    fired_at: list[int] = []

    def start_fire(message: WakeMessage, *stamps: int) -> None:
        if not message.dry_run:
            fired_at.append(time.perf_counter_ns())

    async def drain() -> None:
        with trio.socket.from_stdlib_socket(theirs.dup()) as reader:
            while await reader.recv(1 << 16):
                pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        written_at = time.perf_counter_ns()
        theirs.sendall(burst)
        theirs.shutdown(socket.SHUT_WR)
        await serve_frames(
            connection,
            counters=FrameCounters(),
            stats={"frames": 0, "accepted": 0, "rejected": 0},
            telemetry=cast(Telemetry, _Rows()),
            start_fire=start_fire,
            stopping=trio.Event(),
        )
        ours.close()
    theirs.close()
    return fired_at[0] - written_at


async def main(rounds: int) -> None:
    shadows = [encode_frame(make_wake(f"s{i}", dry_run=True)) for i in range(200)]
    burst = b"".join([*shadows[:100], encode_frame(make_wake("real")), *shadows[100:]])
    results: dict[bool, list[int]] = {True: [], False: []}
    for _ in range(rounds):
        for look in (True, False):
            results[look].append(await one_burst(look, burst))
    for look, name in ((True, "look-ahead"), (False, "without")):
        values = sorted(results[look])
        print(
            f"{name:10} write -> real fire start: p50 {statistics.median(values) / 1e3:7.1f} us"
            f"  p90 {values[int(0.9 * len(values))] / 1e3:7.1f} us  n={len(values)}"
        )
    ratio = statistics.median(results[True]) / statistics.median(results[False])
    print(f"look-ahead / without (p50): {ratio:.3f}x")


trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
