"""In-process tests of the connection loop, the fire path wiring, telemetry rows and shutdown."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
from pathlib import Path

import orjson
import pytest
import trio
import trio.testing

from executor.fire.path import FirePath, FireRequest
from executor.runtime.kill_switch import KillSwitch
from executor.wire.client import connect
from executor.wire.protocol import MAX_FRAME_BYTES, encode_frame
from tests.support.inprocess import RunningServer, make_wake, start_server


def wake_rows(db_path: Path) -> list[tuple[str, str, int, int, float, str]]:
    """Every wake_recv row, in insertion order."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        return db.execute(
            "SELECT correlation_id, stage, started_at_ms, ended_at_ms, duration_ms, metadata_json"
            " FROM latency_events WHERE stage = 'wake_recv' ORDER BY id"
        ).fetchall()


async def test_pipelined_frames_are_acked_in_order(executor_server: RunningServer) -> None:
    """Fifty frames written back to back come back as fifty accepted acks, in order."""
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(b"".join(encode_frame(make_wake(f"c{i}")) for i in range(50)))
        acks = [await client.receive_ack() for _ in range(50)]
    assert [ack.correlation_id for ack in acks] == [f"c{i}" for i in range(50)]
    assert {ack.status for ack in acks} == {"accepted"}
    assert all(ack.reason is None and ack.schema_version == 4 for ack in acks)


async def test_rejected_frame_gets_reason_and_keeps_connection(
    executor_server: RunningServer,
) -> None:
    """A body that does not decode is answered with a rejected ack and the connection stays open."""
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(encode_frame({"wat": 1}))
        rejected = await client.receive_ack()
        accepted = await client.request(make_wake("after"))
    assert rejected.status == "rejected"
    assert rejected.correlation_id == ""
    assert rejected.reason and "wat" in rejected.reason
    assert accepted.status == "accepted" and accepted.correlation_id == "after"
    stats = executor_server.server.statistics()
    assert (stats.frames, stats.accepted, stats.rejected) == (2, 1, 1)


async def test_empty_body_is_rejected_not_closed(executor_server: RunningServer) -> None:
    """A zero-length frame is legal framing whose empty body is rejected."""
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(b"\x00\x00\x00\x00")
        ack = await client.receive_ack()
        assert (await client.request(make_wake("next"))).status == "accepted"
    assert ack.status == "rejected"


async def test_oversized_prefix_closes_without_ack(executor_server: RunningServer) -> None:
    """A declared length over 65536 closes the connection with no ack."""
    async with connect(executor_server.socket_path) as client:
        await client.send_raw((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
        with pytest.raises(EOFError):
            await client.receive_ack()
    stats = executor_server.server.statistics()
    assert stats.oversized_frames == 1
    assert stats.frames == 0


async def test_body_of_exactly_the_cap_is_accepted(executor_server: RunningServer) -> None:
    """A 65536-byte body (a wake padded with trailing whitespace) is read and accepted."""
    body = orjson.dumps(make_wake("big"))
    body += b" " * (MAX_FRAME_BYTES - len(body))
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(len(body).to_bytes(4, "big") + body)
        ack = await client.receive_ack()
    assert (ack.status, ack.correlation_id) == ("accepted", "big")


async def test_large_pipelined_frames_survive_buffer_compaction(
    executor_server: RunningServer,
) -> None:
    """Big frames pipelined back to back (forcing the read buffer to compact) all decode."""
    frames = []
    for i in range(12):
        body = orjson.dumps(make_wake(f"big{i}"))
        body += b" " * (40_000 + 997 * i - len(body))
        frames.append(len(body).to_bytes(4, "big") + body)
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(b"".join(frames))
        acks = [await client.receive_ack() for _ in frames]
    assert [(a.status, a.correlation_id) for a in acks] == [
        ("accepted", f"big{i}") for i in range(12)
    ]


async def test_eof_mid_frame_is_a_quiet_close(executor_server: RunningServer) -> None:
    """A peer that closes halfway through a body gets no ack, no frame count and no row."""
    frame = encode_frame(make_wake("half"))
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(frame[: len(frame) // 2])
    await executor_server.shutdown()
    stats = executor_server.server.statistics()
    assert (stats.frames, stats.accepted) == (0, 0)
    assert wake_rows(executor_server.db_path) == []


async def test_legacy_frames_are_accepted(executor_server: RunningServer) -> None:
    """A v1 body (the 12 original fields only) is accepted."""
    legacy = {
        key: value
        for key, value in orjson.loads(orjson.dumps(make_wake("corr-v1"))).items()
        if key not in {"recv_ns", "clock_domain", "dry_run", "wire_price_yes_dollars"}
        and key not in {"exchange_index", "available_size_contracts", "price_ranges"}
        and key != "correlation_group"
    }
    legacy["schema_version"] = 1
    async with connect(executor_server.socket_path) as client:
        await client.send_raw(encode_frame(legacy))
        ack = await client.receive_ack()
    assert (ack.status, ack.correlation_id) == ("accepted", "corr-v1")


class RecordingDispatcher:
    """A dispatcher that remembers every request (and can be told to raise)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.requests: list[FireRequest] = []
        self.fail_on = fail_on

    async def __call__(self, request: FireRequest) -> None:
        if request.correlation_id == self.fail_on:
            raise RuntimeError("exchange exploded")
        self.requests.append(request)


async def test_dispatcher_gets_snapped_request(nursery: trio.Nursery, short_dir: Path) -> None:
    """An accepted real fire reaches the dispatcher with the snapped price and the configuration."""
    dispatcher = RecordingDispatcher()
    running = await start_server(
        nursery, short_dir, fire_path=FirePath(dispatcher=dispatcher, contract_count=3)
    )
    async with connect(running.socket_path) as client:
        await client.request(
            make_wake("snap", wire_price_yes_dollars=0.564, exchange_index=2, direction="no")
        )
    await running.shutdown()
    [request] = dispatcher.requests
    assert request.price == "0.5600"
    assert request.count == 3
    assert request.exchange_index == 2
    assert request.correlation_id == "snap"
    assert request.template.side == "ask"
    assert running.server.statistics().fired == 1


async def test_refused_price_is_counted_not_dispatched(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """A real fire at an untradeable price is refused and counted; a shadow one still fires."""
    dispatcher = RecordingDispatcher()
    running = await start_server(nursery, short_dir, fire_path=FirePath(dispatcher=dispatcher))
    async with connect(running.socket_path) as client:
        await client.request(make_wake("real", wire_price_yes_dollars=0.0))
        await client.request(make_wake("shadow", wire_price_yes_dollars=0.0, dry_run=True))
    await running.shutdown()
    stats = running.server.statistics()
    assert (stats.refused_price, stats.fired) == (1, 1)
    assert [r.correlation_id for r in dispatcher.requests] == ["shadow"]


async def test_kill_switch_refuses_real_fires_only(nursery: trio.Nursery, short_dir: Path) -> None:
    """An engaged switch refuses real fires, shadow fires bypass it, and release restores."""
    switch = KillSwitch(short_dir / "halt", ttl_s=0)
    switch.engage("maintenance")
    dispatcher = RecordingDispatcher()
    running = await start_server(
        nursery, short_dir, fire_path=FirePath(dispatcher=dispatcher, kill_switch=switch)
    )
    async with connect(running.socket_path) as client:
        await client.request(make_wake("halted"))
        await client.request(make_wake("shadow", dry_run=True))
        await trio.testing.wait_all_tasks_blocked()
        switch.release()
        await client.request(make_wake("released"))
    await running.shutdown()
    stats = running.server.statistics()
    assert stats.refused_kill_switch == 1
    assert [r.correlation_id for r in dispatcher.requests] == ["shadow", "released"]


async def test_raising_dispatcher_is_contained(nursery: trio.Nursery, short_dir: Path) -> None:
    """A dispatcher that raises is counted as a fire error; the connection keeps working."""
    dispatcher = RecordingDispatcher(fail_on="boom")
    running = await start_server(nursery, short_dir, fire_path=FirePath(dispatcher=dispatcher))
    async with connect(running.socket_path) as client:
        assert (await client.request(make_wake("boom"))).status == "accepted"
        await trio.testing.wait_all_tasks_blocked()
        assert (await client.request(make_wake("fine"))).status == "accepted"
    await running.shutdown()
    stats = running.server.statistics()
    assert stats.fire_errors == 1
    assert [r.correlation_id for r in dispatcher.requests] == ["fine"]


async def test_many_concurrent_connections(executor_server: RunningServer) -> None:
    """Forty connections pipelining twenty frames each all get their acks, in order."""

    async def one_client(index: int) -> None:
        async with connect(executor_server.socket_path) as client:
            ids = [f"k{index}-{i}" for i in range(20)]
            await client.send_raw(b"".join(encode_frame(make_wake(cid)) for cid in ids))
            assert [(await client.receive_ack()).correlation_id for _ in ids] == ids

    async with trio.open_nursery() as clients:
        for index in range(40):
            clients.start_soon(one_client, index)
    assert executor_server.server.statistics().accepted == 800


async def test_half_frame_staller_does_not_block_others(executor_server: RunningServer) -> None:
    """A connection stuck halfway through a frame does not delay another connection's acks."""
    frame = encode_frame(make_wake("stuck"))
    async with connect(executor_server.socket_path) as staller:
        await staller.send_raw(frame[:10])
        async with connect(executor_server.socket_path) as client:
            for i in range(10):
                assert (await client.request(make_wake(f"ok{i}"))).status == "accepted"
    assert executor_server.server.statistics().accepted == 10


async def test_client_not_reading_acks_does_not_block_others(
    executor_server: RunningServer,
) -> None:
    """A peer that never reads its acks stalls only its own connection."""
    frame = encode_frame(make_wake("flood"))
    flood = b"".join([frame] * 2000)
    async with connect(executor_server.socket_path) as flooder, trio.open_nursery() as tasks:
        tasks.start_soon(flooder.send_raw, flood)
        # Wait until the flooder's acks fill its socket: the server then waits on that write.
        await trio.testing.wait_all_tasks_blocked()
        stalled_at = executor_server.server.statistics().accepted
        async with connect(executor_server.socket_path) as client:
            for i in range(20):
                assert (await client.request(make_wake(f"ok{i}"))).status == "accepted"
        assert executor_server.server.statistics().accepted == stalled_at + 20
        assert stalled_at < 2000
        tasks.cancel_scope.cancel()


async def test_peer_gone_before_ack_counts_unacked(executor_server: RunningServer) -> None:
    """A frame whose peer vanished before its ack is counted unacked, with no row and no fire."""
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(executor_server.socket_path))
    raw.sendall(encode_frame(make_wake("ghost")))
    raw.close()
    await trio.testing.wait_all_tasks_blocked()
    await executor_server.shutdown()
    stats = executor_server.server.statistics()
    assert (stats.accepted, stats.unacked, stats.fired) == (1, 1, 0)
    assert wake_rows(executor_server.db_path) == []


async def test_rows_written_with_exact_columns(executor_server: RunningServer) -> None:
    """Each accepted frame leaves one wake_recv row with the spec's columns and metadata."""
    async with connect(executor_server.socket_path) as client:
        first = await client.request(make_wake("r1"))
        await client.request(make_wake("r2", dry_run=True))
    await executor_server.shutdown()
    rows = wake_rows(executor_server.db_path)
    assert [(r[0], r[1], r[5]) for r in rows] == [
        ("r1", "wake_recv", '{"dry_run": false}'),
        ("r2", "wake_recv", '{"dry_run": true}'),
    ]
    assert rows[0][2] == first.received_at_ms
    assert all(r[3] >= r[2] and r[4] > 0 for r in rows)
    telemetry = executor_server.server.telemetry.statistics()
    assert telemetry.rows_written == executor_server.server.statistics().accepted == 2


async def test_shutdown_stops_accepting_and_removes_socket(executor_server: RunningServer) -> None:
    """After shutdown the socket file is gone and connecting fails."""
    await executor_server.shutdown()
    assert not executor_server.socket_path.exists()
    with pytest.raises(OSError):
        await trio.open_unix_socket(str(executor_server.socket_path))


async def test_shutdown_closes_idle_connections(executor_server: RunningServer) -> None:
    """An idle connection does not hold the shutdown up; its peer sees EOF."""
    async with connect(executor_server.socket_path) as client:
        await client.request(make_wake("idle"))
        await executor_server.shutdown()
        with pytest.raises(EOFError):
            await client.receive_ack()


async def test_slow_fires_are_cancelled_after_grace(nursery: trio.Nursery, short_dir: Path) -> None:
    """A fire still running when the grace period ends is cancelled and counted."""

    async def stuck(request: FireRequest) -> None:
        await trio.sleep_forever()

    running = await start_server(
        nursery, short_dir, fire_path=FirePath(dispatcher=stuck), grace_s=0.05
    )
    async with connect(running.socket_path) as client:
        await client.request(make_wake("slow"))
    await trio.testing.wait_all_tasks_blocked()
    await running.shutdown()
    stats = running.server.statistics()
    assert (stats.fired, stats.fires_cancelled) == (1, 1)
    assert running.server.telemetry.statistics().rows_written == 1


async def test_second_executor_on_same_socket_is_refused(
    executor_server: RunningServer, nursery: trio.Nursery
) -> None:
    """A second server on a live socket path fails to start and leaves the first one serving."""
    from executor.server import ExecutorServer, ServerConfig, SocketSetupError

    second = ExecutorServer(
        ServerConfig(
            socket_path=executor_server.socket_path,
            telemetry_db=executor_server.db_path.with_name("other.db"),
            handle_signals=False,
        )
    )
    with pytest.raises(SocketSetupError, match="another executor"):
        await second.run()
    async with connect(executor_server.socket_path) as client:
        assert (await client.request(make_wake("still"))).status == "accepted"


async def test_socket_is_owner_only(executor_server: RunningServer) -> None:
    """The socket file's permission bits are exactly 0600."""
    assert executor_server.socket_path.stat().st_mode & 0o777 == 0o600
