"""Issue 9, end to end: an executor whose stderr is a pipe nobody reads keeps acking every frame.

The stderr pipe is shrunk to one page and filled before the executor starts, so from its first log
line on the writer thread is blocked in ``write(2)``: every log record after that waits in the
bounded queue or is dropped and counted. Meanwhile four clients pipeline good and malformed frames
(each malformed one is a per-frame warning). Only once every ack is in does the test read the pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
import trio

from bench.scenarios.soak_process import identity_problems, parse_exit_counters
from executor.wire.client import ExecutorClient, connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import make_wake
from tests.support.processes import (
    START_TIMEOUT_S,
    Spawner,
    executor_command,
    exit_counters,
    open_client,
    receive_ack,
)

CLIENTS = 4
"""Concurrent connections (the issue's scenario: several pollers, one stalled log reader)."""

GOOD_PER_CLIENT = 5_000
"""Valid wakes each client sends (20,000 in all)."""

BAD_PER_CLIENT = 5_000
"""Malformed frames each client sends (20,000 in all), alternating with the valid ones."""

FRAMES_PER_SEND = 100
"""Frames written per send: pipelining, not one round trip per frame."""

PIPE_BYTES = 4096
"""The stderr pipe's capacity (bytes, one page): small, so it is full before the test begins."""

LOG_QUEUE_RECORDS = 16
"""The executor's log queue (records): small, so a blocked writer shows up as drops at once."""

ACKS_TIMEOUT_S = 120.0
"""Bound on all 40,000 acks (s): a hang, not a speed check (a few seconds on an idle machine)."""

EXIT_TIMEOUT_S = 30.0
"""Bound on the exit after SIGTERM once the pipe is being read (s)."""

MALFORMED = encode_frame({"wat": 1})
"""A frame that decodes as JSON but not as a wake: a rejected ack and one warning, every time."""


def fill_pipe(write_fd: int) -> int:
    """Write into the pipe until it is full, without blocking; the number of bytes written."""
    flags = fcntl.fcntl(write_fd, fcntl.F_GETFL)
    fcntl.fcntl(write_fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    written = 0
    try:
        while True:
            written += os.write(write_fd, b"#" * PIPE_BYTES)
    except BlockingIOError:
        pass
    finally:
        # The executor inherits this open file description: its stderr must block as usual.
        fcntl.fcntl(write_fd, fcntl.F_SETFL, flags)
    return written


async def wait_until_accepting(process: subprocess.Popen[bytes], socket_path: Path) -> None:
    """Poll until ``socket_path`` accepts; fail if the executor exits or takes too long."""
    with trio.fail_after(START_TIMEOUT_S):
        while True:
            assert process.poll() is None, "the executor exited before serving"
            try:
                stream = await trio.open_unix_socket(os.fspath(socket_path))
            except (FileNotFoundError, ConnectionRefusedError):
                await trio.sleep(0.02)
            else:
                await stream.aclose()
                return


async def run_client(client: ExecutorClient, index: int) -> None:
    """Send alternating malformed and valid frames; check every ack arrives, in order."""
    frames = []
    for number in range(GOOD_PER_CLIENT):
        frames.append(MALFORMED)
        frames.append(encode_frame(make_wake(f"c{index}-{number}", dry_run=True)))

    async def send_all() -> None:
        for start in range(0, len(frames), FRAMES_PER_SEND):
            await client.send_raw(b"".join(frames[start : start + FRAMES_PER_SEND]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all)
        for number in range(GOOD_PER_CLIENT):
            rejected = await client.receive_ack()
            assert rejected.status == "rejected", (index, number)
            accepted = await client.receive_ack()
            assert (accepted.status, accepted.correlation_id) == (
                "accepted",
                f"c{index}-{number}",
            )


@pytest.mark.timeout(300)
async def test_unread_stderr_pipe_does_not_hold_up_acks(short_dir: Path) -> None:
    """With stderr a full pipe nobody reads, 40,000 frames from four clients are all acked in
    order; after the pipe is drained SIGTERM exits 0 with balanced counters and log_dropped > 0."""
    assert GOOD_PER_CLIENT == BAD_PER_CLIENT  # the frames alternate
    socket_path = short_dir / "x.sock"
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    filler = fill_pipe(write_fd)
    command = executor_command(
        "serve",
        "--socket",
        socket_path,
        "--telemetry-db",
        short_dir / "t.db",
        "--log-level",
        "info",
        "--log-format",
        "json",
        "--log-queue-records",
        str(LOG_QUEUE_RECORDS),
    )
    process = subprocess.Popen(  # noqa: ASYNC220 (starting it is quick; waits go to a thread)
        command, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd
    )
    os.close(write_fd)  # the executor holds the only write end: EOF when it exits
    captured = bytearray()
    reader = threading.Thread(target=_drain, args=(read_fd, captured), daemon=True)
    try:
        await wait_until_accepting(process, socket_path)
        with trio.fail_after(ACKS_TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                for index in range(CLIENTS):
                    nursery.start_soon(_connect_and_run, socket_path, index)
        assert process.poll() is None

        reader.start()  # only now does anyone read the executor's stderr
        process.send_signal(signal.SIGTERM)
        status = await trio.to_thread.run_sync(process.wait, EXIT_TIMEOUT_S)
        reader.join(EXIT_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if not reader.is_alive():
            os.close(read_fd)
    assert status == 0
    assert not reader.is_alive()
    assert captured[:filler] == b"#" * filler
    text = captured[filler:].decode("utf-8", "replace")
    assert "Traceback" not in text
    counters = parse_exit_counters(text)
    total = CLIENTS * (GOOD_PER_CLIENT + BAD_PER_CLIENT)
    assert (counters["frames"], counters["rejected"]) == (total, CLIENTS * BAD_PER_CLIENT)
    assert counters["unacked"] == 0
    assert identity_problems(counters) == []
    assert counters["log_dropped"] > 0
    first_line = next(line for line in text.splitlines() if line.startswith("frames="))
    assert first_line.split()[-18].startswith("log_dropped=")  # then seventeen later keys


async def _connect_and_run(socket_path: Path, index: int) -> None:
    async with connect(socket_path) as client:
        await run_client(client, index)


def _drain(read_fd: int, into: bytearray) -> None:
    """Read the pipe until end-of-file (every write end closed)."""
    while chunk := os.read(read_fd, 65536):
        into += chunk


def test_suppressed_warnings_are_reported_at_exit(short_dir: Path) -> None:
    """Rejected frames past the warning budget are reported as one suppressed count at exit,
    before the counter lines, and the first counter line has log_dropped=0 (before the
    reconciliation and signing counters, the last keys)."""
    rejected = 30
    spawner = Spawner(short_dir)
    try:
        executor = spawner.serve(short_dir / "x.sock", short_dir / "t.db", "--log-format", "json")
        with open_client(short_dir / "x.sock") as sock:
            sock.sendall(MALFORMED * rejected)
            assert [receive_ack(sock).status for _ in range(rejected)] == ["rejected"] * rejected
        executor.signal(signal.SIGTERM)
        assert executor.wait() == 0
    finally:
        spawner.kill_all()
    lines = executor.stderr_lines()
    server, _ = exit_counters(lines)
    assert server["rejected"] == rejected
    assert lines[-2].split()[-18:-15] == ["log_dropped=0", "reconciled=0", "reconcile_failed=0"]
    later = [key.split("=")[0] for key in lines[-2].split()[-15:]]
    assert later == [
        "presigned",
        "signed_inline",
        "refused_audit",
        "stream_connected",
        "stream_reconnects",
        "stream_fill_messages",
        "stream_order_messages",
        "stream_fills_applied",
        "stream_orders_applied",
        "cancels_sent",
        "cancels_failed",
        "order_group_triggered",
        "write_token_waits",
        "read_token_waits",
        "adopted",
    ]
    events = [json.loads(line) for line in lines[:-2]]
    shown = [event for event in events if event["event"] == "rejected frame"]
    summaries = [event for event in events if event["event"] == "warnings suppressed"]
    assert [(s["kind"], s["suppressed"]) for s in summaries] == [
        ("rejected frame", rejected - len(shown))
    ]
    assert 0 < len(shown) < rejected
