"""Guards for six behaviours no other test pinned down (each was checked to fail on its defect).

- the stamp is taken after the body read, not before it;
- fires still running when the connections finish get the grace period, not a cancellation;
- a pipelining connection passes through the scheduler once per frame, so others are served;
- closing the telemetry channel ends the consumer's batch linger at once;
- the exit clean-up removes only a socket at the socket path, never what replaced it;
- ``received_at_ms`` is wall-clock time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sqlite3
import time
from pathlib import Path

import trio
import trio.testing

from executor.fire.path import FirePath, FireRequest
from executor.telemetry import Telemetry, serve_telemetry, wake_recv_row
from executor.wire.client import connect
from executor.wire.protocol import PREFIX_BYTES, encode_frame
from tests.support.inprocess import RunningServer, make_wake, start_server

BODY_DELAY_S = 0.5
"""Pause between a frame's prefix and its body (s): far longer than decoding and acking take."""

STEP_TIMEOUT_S = 10.0
"""Bound on each wait below (s): a hang, not a speed check."""

FLOOD_FRAMES = 200
"""Frames one client pipelines in one write (~90 KiB: fits a Unix socket's send buffer)."""


def wake_row(db_path: Path) -> tuple[int, int, float]:
    """``started_at_ms``, ``ended_at_ms`` and ``duration_ms`` of the only wake_recv row."""
    with contextlib.closing(sqlite3.connect(db_path)) as db, db:
        rows = db.execute(
            "SELECT started_at_ms, ended_at_ms, duration_ms FROM latency_events"
            " WHERE stage = 'wake_recv'"
        ).fetchall()
    assert len(rows) == 1, rows
    started, ended, duration = rows[0]
    return int(started), int(ended), float(duration)


def wall_ms() -> int:
    """Wall-clock milliseconds, as the executor stamps them."""
    return time.time_ns() // 1_000_000


async def test_stamp_is_taken_after_the_body_arrives(executor_server: RunningServer) -> None:
    """A body sent 0.5 s after its prefix gets a row stamped after the body was sent, and a
    duration that excludes the wait."""
    frame = encode_frame(make_wake("late-body"))
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(frame[:PREFIX_BYTES])
        await trio.sleep(BODY_DELAY_S)
        body_sent_ms = wall_ms()
        await client.send_raw(frame[PREFIX_BYTES:])
        with trio.fail_after(STEP_TIMEOUT_S):
            ack = await client.receive_ack()
    await executor_server.shutdown()
    started_ms, _, duration_ms = wake_row(executor_server.db_path)
    assert ack.received_at_ms >= body_sent_ms
    assert started_ms >= body_sent_ms
    assert duration_ms < BODY_DELAY_S * 1000 / 2


async def test_fire_running_when_connections_finish_completes_in_the_grace(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """A fire still in its dispatcher after every connection has closed at shutdown runs to
    completion inside the grace period and counts as fired, not cancelled."""
    dispatched = trio.Event()
    resume = trio.Event()
    completed: list[str] = []

    async def slow_dispatcher(request: FireRequest) -> None:
        dispatched.set()
        await resume.wait()
        completed.append(request.correlation_id)

    running = await start_server(
        nursery, short_dir, fire_path=FirePath(dispatcher=slow_dispatcher), grace_s=5.0
    )
    with trio.fail_after(STEP_TIMEOUT_S):
        async with connect(running.socket_path) as client:
            assert (await client.request(make_wake("in-flight"))).status == "accepted"
        await dispatched.wait()
        running.server.request_shutdown()
        # Every connection task has ended and anything the shutdown would do to fires has been
        # done; the fire is still waiting in its dispatcher.
        await trio.testing.wait_all_tasks_blocked()
        assert running.server.statistics().connections_open == 0
        resume.set()
        await running.finished.wait()
    stats = running.server.statistics()
    assert completed == ["in-flight"]
    assert (stats.fired, stats.fires_cancelled) == (1, 0)


async def test_pipelined_flood_does_not_starve_another_connection(
    executor_server: RunningServer,
) -> None:
    """While one client's pipelined frames are being read, a second client's single request is
    answered before the first client's frames have all been read."""
    flood = b"".join(
        encode_frame(make_wake(f"flood-{index}", dry_run=True)) for index in range(FLOOD_FRAMES)
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as flooder:
        flooder.connect(os.fspath(executor_server.socket_path))
        flooder.setblocking(False)
        async with connect(executor_server.socket_path) as other:
            # Both connections accepted and their tasks waiting for a first frame.
            await trio.testing.wait_all_tasks_blocked()
            # The whole flood is in the kernel before the executor reads any of it, so nothing
            # but the per-frame checkpoint can make its connection task let others run.
            assert flooder.send(flood) == len(flood)
            with trio.fail_after(STEP_TIMEOUT_S):
                ack = await other.request(make_wake("other"))
                flood_frames_read = executor_server.server.statistics().frames - 1
                assert ack.status == "accepted"
                await trio.testing.wait_all_tasks_blocked()  # the rest of the flood is read
    assert flood_frames_read < FLOOD_FRAMES
    assert executor_server.server.statistics().frames == FLOOD_FRAMES + 1


async def test_close_ends_the_batch_linger_at_once(short_dir: Path) -> None:
    """With a 60 s batch linger, closing the channel ends the consumer's wait at once: the row is
    written and the consumer returns."""
    with trio.fail_after(STEP_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            telemetry: Telemetry = await nursery.start(
                functools.partial(serve_telemetry, short_dir / "t.db", linger_s=60.0)
            )
            telemetry.record(wake_recv_row("lingering", 1, 2, 1_000, False))
            await trio.testing.wait_all_tasks_blocked()  # the consumer is lingering
            assert telemetry.statistics().rows_written == 0
            telemetry.close()
    assert telemetry.statistics().rows_written == 1


async def test_shutdown_leaves_a_file_that_replaced_the_socket(
    executor_server: RunningServer,
) -> None:
    """A regular file put where the socket was, while serving, is still there after shutdown."""
    socket_path = executor_server.socket_path
    replacement = socket_path.with_name("replacement")
    replacement.write_text("not the executor's")
    os.replace(replacement, socket_path)
    with trio.fail_after(STEP_TIMEOUT_S):
        await executor_server.shutdown()
    assert socket_path.read_text() == "not the executor's"


async def test_received_at_is_wall_clock_time(executor_server: RunningServer) -> None:
    """The ack's received_at_ms and the row's wall times lie between wall-clock readings taken
    before the request and after its ack."""
    before_ms = wall_ms()
    async with connect(executor_server.socket_path) as client:
        with trio.fail_after(STEP_TIMEOUT_S):
            ack = await client.request(make_wake("wall"))
    after_ms = wall_ms()
    await executor_server.shutdown()
    started_ms, ended_ms, _ = wake_row(executor_server.db_path)
    assert before_ms <= ack.received_at_ms <= after_ms
    assert before_ms <= started_ms <= ended_ms <= after_ms
