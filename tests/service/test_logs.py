"""executor.logs: log calls only enqueue, a full queue drops and counts, warnings are limited."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator

import pytest
import structlog
import trio
from structlog.testing import capture_logs

from executor import logs
from executor.logs import RATE_LIMIT_INTERVAL_S, RATE_LIMIT_LINES, RateLimitedWarning
from executor.wire.client import connect
from executor.wire.protocol import encode_frame
from tests.support.inprocess import RunningServer

STALL_TIMEOUT_S = 30.0
"""Longest a stalled test writer stays stalled if the test never releases it (s)."""

QUEUE_RECORDS = 8
"""The log queue of the stalled-writer tests (records): small, so it fills at once."""


class StalledWriter(logging.Handler):
    """A writer whose output is blocked until released, like a pipe nobody reads.

    A record handed to it on the thread that logged it is noted and returned at once instead of
    blocking, so a regression fails the test rather than hanging it.
    """

    def __init__(self, logging_thread: int) -> None:
        super().__init__()
        self.logging_thread = logging_thread
        self.resume = threading.Event()
        self.stalled = threading.Event()
        self.written: list[str] = []
        self.on_logging_thread: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if threading.get_ident() == self.logging_thread:
            self.on_logging_thread.append(record.getMessage())
            return
        self.stalled.set()
        self.resume.wait(STALL_TIMEOUT_S)
        self.written.append(record.getMessage())


@pytest.fixture
def stalled_writer() -> Iterator[StalledWriter]:
    """Logging started with a stalled writer and an 8-record queue; undone after the test."""
    writer = StalledWriter(threading.get_ident())
    root_level = logging.getLogger().level
    logs.start_logging("json", "info", queue_records=QUEUE_RECORDS, writer=writer)
    try:
        yield writer
    finally:
        writer.resume.set()
        logs.stop_logging()
        logging.getLogger().setLevel(root_level)
        structlog.reset_defaults()


async def test_log_calls_do_not_write_on_the_calling_thread(stalled_writer: StalledWriter) -> None:
    """With the writer blocked, log calls from the Trio thread return, and a full queue drops and
    counts each further record instead of waiting."""
    log = structlog.get_logger()
    dropped_before = logs.dropped_count()
    log.info("first")
    await trio.to_thread.run_sync(stalled_writer.stalled.wait, STALL_TIMEOUT_S)
    assert stalled_writer.stalled.is_set()

    for index in range(100):
        log.warning("flood", index=index)

    assert stalled_writer.on_logging_thread == []
    # The writer holds "first"; the queue holds the first 8 floods; the other 92 were dropped.
    assert logs.dropped_count() - dropped_before == 100 - QUEUE_RECORDS
    stalled_writer.resume.set()
    assert logs.stop_logging(timeout_s=STALL_TIMEOUT_S)
    assert [line.count('"flood"') for line in stalled_writer.written] == [0] + [1] * QUEUE_RECORDS


async def test_exit_flush_gives_up_after_its_timeout(stalled_writer: StalledWriter) -> None:
    """A writer that never unblocks does not hold the exit flush past its timeout; what was still
    queued is counted as dropped."""
    log = structlog.get_logger()
    log.info("first")
    await trio.to_thread.run_sync(stalled_writer.stalled.wait, STALL_TIMEOUT_S)
    for index in range(3):
        log.info("queued", index=index)
    dropped_before = logs.dropped_count()
    with trio.fail_after(STALL_TIMEOUT_S / 2):
        flushed = await trio.to_thread.run_sync(logs.stop_logging, 0.2)
    assert not flushed
    assert logs.dropped_count() - dropped_before == 3


def test_rate_limited_warning_shows_a_budget_then_counts() -> None:
    """Past its per-interval budget a warning is only counted; the count is printed when the
    interval rolls over and on flush, and shown plus suppressed equals the warnings given."""
    now = 0.0
    limiter = RateLimitedWarning("kind x", lines=3, interval_s=10.0, clock=lambda: now)
    with capture_logs() as captured:
        for index in range(10):
            limiter.warning(index=index)
        now = 10.0  # the next interval
        limiter.warning(index=10)
        limiter.warning(index=11)
        limiter.flush()  # nothing suppressed in this interval yet: no line
        for index in range(12, 20):
            limiter.warning(index=index)
        limiter.flush()
    shown = [entry["index"] for entry in captured if entry["event"] == "kind x"]
    summaries = [entry for entry in captured if entry["event"] == "warnings suppressed"]
    assert shown == [0, 1, 2, 10, 11, 12]
    assert [(s["kind"], s["suppressed"]) for s in summaries] == [("kind x", 7), ("kind x", 7)]
    assert [entry["event"] for entry in captured][3] == "warnings suppressed"  # before index 10
    assert len(shown) + sum(s["suppressed"] for s in summaries) == 20


def test_without_a_flood_every_warning_is_shown() -> None:
    """Negative twin: warnings within the budget are all shown, and no suppressed line appears."""
    limiter = RateLimitedWarning("kind y", lines=3, interval_s=10.0, clock=lambda: 0.0)
    with capture_logs() as captured:
        for index in range(3):
            limiter.warning(index=index)
        limiter.flush()
    assert [(entry["event"], entry["index"]) for entry in captured] == [
        ("kind y", 0),
        ("kind y", 1),
        ("kind y", 2),
    ]


REJECTED_FRAMES = 10_000
"""Malformed frames sent by the rejected-frame flood test."""


async def test_ten_thousand_rejected_frames_log_a_bounded_count(
    executor_server: RunningServer,
) -> None:
    """10,000 rejected frames print at most the per-interval budget of warning lines, and those
    lines plus the suppressed counts still add up to 10,000."""
    malformed = encode_frame({"wat": 1})
    with capture_logs() as captured:
        started = time.monotonic()
        async with connect(executor_server.socket_path) as client:

            async def send_all() -> None:
                for _ in range(REJECTED_FRAMES // 100):
                    await client.send_raw(malformed * 100)

            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send_all)
                    for _ in range(REJECTED_FRAMES):
                        assert (await client.receive_ack()).status == "rejected"
        await executor_server.shutdown()
        logs.flush_suppressed()
        elapsed = time.monotonic() - started
    shown = [entry for entry in captured if entry["event"] == "rejected frame"]
    suppressed = [
        entry["suppressed"]
        for entry in captured
        if entry["event"] == "warnings suppressed" and entry["kind"] == "rejected frame"
    ]
    intervals = math.floor(elapsed / RATE_LIMIT_INTERVAL_S) + 1
    assert 0 < len(shown) <= RATE_LIMIT_LINES * intervals
    assert len(suppressed) <= intervals
    assert len(shown) + sum(suppressed) == REJECTED_FRAMES


def test_per_request_library_lines_are_quiet() -> None:
    """httpx's INFO line per request is not written at the info level; its warnings still are."""
    writer = StalledWriter(threading.get_ident())
    writer.resume.set()  # never stalls: a plain collecting writer
    root_level = logging.getLogger().level
    logs.start_logging("json", "info", writer=writer)
    try:
        logging.getLogger("httpx").info('HTTP Request: POST https://x/y "HTTP/1.1 201 Created"')
        logging.getLogger("httpx").warning("a warning from httpx")
        structlog.get_logger().info("an executor event")
    finally:
        logs.stop_logging()
        logging.getLogger().setLevel(root_level)
        structlog.reset_defaults()
    written = "\n".join(writer.written)
    assert "HTTP Request" not in written
    assert "a warning from httpx" in written and "an executor event" in written
