"""Backpressure across connections: stalled peers stall only themselves; idle peers cost a task.

tests/test_server.py covers one flooder and one half-frame staller against one client; these tests
hold several of each at once against several clients, show a stalled connection resumes, and
count what idle connections cost. Latencies are printed (run with -s), never asserted.
"""

from __future__ import annotations

import time

import trio
import trio.testing

from bench.reports.stats import percentile
from executor.wire.client import ExecutorClient, connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import RunningServer, make_wake
from tests.support.probes import opened_since, settle, settle_to_baseline, trio_tasks, warm_up

FLOOD_FRAMES = 3000
"""Frames each flooder pipelines: their acks far exceed what a socket buffer holds."""


async def timed_requests(client: ExecutorClient, label: str, count: int) -> list[float]:
    """``count`` checked round trips; their latencies in microseconds (reported, not asserted)."""
    latencies = []
    for index in range(count):
        started = time.perf_counter_ns()
        ack = await client.request(make_wake(f"{label}-{index}"))
        latencies.append((time.perf_counter_ns() - started) / 1000)
        assert (ack.status, ack.correlation_id) == ("accepted", f"{label}-{index}")
    return latencies


async def test_stalled_peers_stall_only_themselves(executor_server: RunningServer) -> None:
    """Three flooders that never read and two half-frame stallers stop only their own
    connections: four clients all get their acks, and a flooder that starts reading resumes."""
    server = executor_server.server
    frame = encode_frame(make_wake("flood"))
    flooders = [await trio.open_unix_socket(str(executor_server.socket_path)) for _ in range(3)]
    stallers = [await trio.open_unix_socket(str(executor_server.socket_path)) for _ in range(2)]
    try:
        async with trio.open_nursery() as floods:
            for stream in flooders:
                floods.start_soon(stream.send_all, frame * FLOOD_FRAMES)
            for stream in stallers:
                await stream.send_all(frame[: len(frame) // 2])
            await trio.testing.wait_all_tasks_blocked()
            stalled_at = server.statistics().frames
            assert stalled_at < 3 * FLOOD_FRAMES
            latencies: list[float] = []

            async def client(index: int) -> None:
                async with connect(executor_server.socket_path) as good:
                    latencies.extend(await timed_requests(good, f"good{index}", 25))

            async with trio.open_nursery() as clients:
                for index in range(4):
                    clients.start_soon(client, index)
            await trio.testing.wait_all_tasks_blocked()
            # Exactly the good clients' frames were processed: every stalled peer stayed stalled.
            assert server.statistics().frames == stalled_at + 100
            print(
                f"with 3 flooders and 2 stallers: {len(latencies)} round trips, p50 "
                f"{percentile(latencies, 0.5):.0f} us, p99 {percentile(latencies, 0.99):.0f} us, "
                f"max {max(latencies):.0f} us"
            )

            # Backpressure, not damage: once the first flooder reads, it gets every ack.
            resumed = ExecutorClient(flooders[0])
            acks = [await resumed.receive_ack() for _ in range(FLOOD_FRAMES)]
            assert {(ack.status, ack.correlation_id) for ack in acks} == {("accepted", "flood")}
            floods.cancel_scope.cancel()
    finally:
        for stream in flooders + stallers:
            await stream.aclose()
    await settle(lambda: server.statistics().connections_open == 0, "stalled peers closed")


async def test_idle_connections_cost_only_their_tasks(executor_server: RunningServer) -> None:
    """100 idle connections are 100 open connections, 100 tasks and 200 fds (both ends live in
    this process), do not stop another client, and give everything back when they close."""
    server = executor_server.server
    async with connect(executor_server.socket_path) as good:
        fds, tasks = await warm_up(executor_server, good)
        idle = [await trio.open_unix_socket(str(executor_server.socket_path)) for _ in range(100)]
        await settle(lambda: server.statistics().connections_open == 101, "idle connections open")
        await trio.testing.wait_all_tasks_blocked()
        assert opened_since(fds) == 200
        assert trio_tasks() == tasks + 100
        latencies = await timed_requests(good, "among-idle", 50)
        print(f"among 100 idle connections: p50 {percentile(latencies, 0.5):.0f} us")
        for stream in idle:
            await stream.aclose()
        await settle_to_baseline(executor_server, fds, tasks, 1)
    stats = server.statistics()
    assert stats.frames == stats.accepted == 3 + 50
