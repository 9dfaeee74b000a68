"""Logging that cannot block the event loop, and rate-limited per-frame warnings.

structlog renders each event to a string on the calling thread (CPU only: processors, then the
console or JSON renderer), hands it to the standard library (``structlog.stdlib.LoggerFactory``,
structlog's documented "render within structlog" arrangement), and the root logger's only handler
puts the record on a **bounded** ``queue.Queue`` without waiting. One ``QueueListener`` thread (a
daemon) takes records off the queue and writes them to stderr. So a log call from the Trio thread
never performs I/O: when whoever reads our stderr stalls, the writer thread blocks in ``write(2)``,
the queue fills, and further records are dropped and counted (:func:`dropped_count`, printed as
``log_dropped`` at exit) instead of stopping the loop (issue 9).

:class:`RateLimitedWarning` bounds the lines one kind of per-frame warning can produce: at most
``RATE_LIMIT_LINES`` per ``RATE_LIMIT_INTERVAL_S``, then one ``warnings suppressed`` line with the
count when the interval rolls over (on the next warning of that kind) or at shutdown
(:func:`flush_suppressed`, which :func:`stop_logging` calls).
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import queue
import select
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final

import structlog

LOG_QUEUE_RECORDS: Final = 4096
"""Records waiting for the writer thread before new ones are dropped (records). Seconds of the
busiest logging this executor does (connection lines and rate-limited warnings) and at most a few
MiB of memory at ~1 KiB per record; a guess, not a measurement."""

FLUSH_TIMEOUT_S: Final = 2.0
"""Longest wait at exit for queued records to reach stderr (seconds). Plenty for a reader that
keeps up; a stalled reader must not hold the exit forever, so past it the rest is dropped."""

RATE_LIMIT_LINES: Final = 10
"""Lines one kind of per-frame warning may print per interval (lines): the first few show the
problem in full; a peer sending thousands of bad frames adds one summary line, not thousands."""

RATE_LIMIT_INTERVAL_S: Final = 10.0
"""Length of a rate-limit interval (seconds): a flood shows up at least every 10 s, and five kinds
at 10 lines each stay under ~5 lines/s, which any reader of stderr keeps up with."""

QUIET_LIBRARIES: Final = ("httpx", "httpcore", "hpack")
"""Libraries whose INFO lines are one per request (httpx: "HTTP Request: POST ..."): every order and
account poll would log twice. They log at WARNING and above; the executor logs its own events."""

_BLOCKED_WRITE_POLL_S: Final = 0.1
"""How often a writer facing a non-blocking, full stderr looks again (seconds)."""

_dropped_lock = threading.Lock()
_dropped = 0


def dropped_count() -> int:
    """Log records dropped since start: the queue was full, stderr failed, or the exit flush ran
    out of time."""
    return _dropped


def _count_dropped(records: int = 1) -> None:
    global _dropped
    with _dropped_lock:  # records are dropped from the logging thread and the writer thread
        _dropped += records


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """Puts a record on the bounded queue without waiting; a full queue drops and counts it."""

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            _count_dropped()

    def handleError(self, record: logging.LogRecord) -> None:
        # The base class prints a traceback to stderr, on the calling thread: count it instead.
        _count_dropped()


class _StderrWriter(logging.Handler):
    """Writes each record's message as one line to a file descriptor; used by the writer thread.

    Writes go straight to the descriptor with ``os.write`` rather than through ``sys.stderr``, so
    a write blocked on a stalled pipe holds no lock the main thread needs at exit (``print`` of the
    counters, the interpreter's flush of ``sys.stderr``).
    """

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def handle(self, record: logging.LogRecord) -> bool:
        # Only the listener thread calls this, so no handler lock: logging.shutdown() at exit
        # acquires every handler's lock, and must not wait on a write blocked on a stalled pipe.
        if not self.filter(record):
            return False
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        data = memoryview((self.format(record) + "\n").encode("utf-8", "backslashreplace"))
        try:
            while data:
                try:
                    written = os.write(self._fd, data)
                except BlockingIOError:  # a descriptor someone else made non-blocking
                    select.select([], [self._fd], [], _BLOCKED_WRITE_POLL_S)
                    continue
                data = data[written:]
        except OSError:  # stderr closed or broken: nowhere to write, and nowhere to say so
            _count_dropped()


class _BoundedListener(logging.handlers.QueueListener):
    """A ``QueueListener`` whose stop waits a bounded time (the base class can wait forever)."""

    def __init__(self, records: queue.Queue[Any], writer: logging.Handler) -> None:
        super().__init__(records, writer, respect_handler_level=False)
        self._records = records

    def stop_within(self, timeout_s: float) -> bool:
        """Let the thread write what is queued and end; False if ``timeout_s`` ran out first."""
        thread = self._thread
        if thread is None:
            return True
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.enqueue_sentinel()  # put_nowait: a full queue raises queue.Full
                break
            except queue.Full:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(min(_BLOCKED_WRITE_POLL_S, timeout_s))
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            return False
        self._thread = None
        return True

    def abandon(self) -> int:
        """Take the records still queued off the queue unwritten; how many there were.

        The thread, possibly blocked in a write, then finds only the sentinel and ends.
        """
        abandoned = 0
        while True:
            try:
                item = self._records.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, logging.LogRecord):
                abandoned += 1
        with contextlib.suppress(queue.Full):
            self.enqueue_sentinel()
        return abandoned


class _Installed:
    """What :func:`start_logging` set up, for :func:`stop_logging` to take down."""

    def __init__(self, handler: _DroppingQueueHandler, listener: _BoundedListener) -> None:
        self.handler = handler
        self.listener = listener


_installed: _Installed | None = None


def start_logging(
    log_format: str,
    level: str,
    *,
    queue_records: int = LOG_QUEUE_RECORDS,
    writer: logging.Handler | None = None,
) -> None:
    """Configure structlog and the standard library for the whole process, and start the writer.

    Args:
        log_format: ``console``, ``json``, or ``auto`` (console on a terminal, JSON otherwise).
        level: the lowest level logged (``debug``, ``info``, ``warning``, ``error``).
        queue_records: records held for the writer thread before new ones are dropped.
        writer: the handler the writer thread calls (tests); stderr's descriptor by default.
    """
    global _installed
    if _installed is not None:
        raise RuntimeError("logging is already started")
    stderr_is_tty = sys.stderr.isatty()
    if log_format == "auto":
        log_format = "console" if stderr_is_tty else "json"
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=stderr_is_tty)
        if log_format == "console"
        else structlog.processors.JSONRenderer()
    )
    level_number: int = getattr(logging, level.upper())
    records: queue.Queue[Any] = queue.Queue(maxsize=queue_records)
    handler = _DroppingQueueHandler(records)
    listener = _BoundedListener(records, writer or _StderrWriter(sys.stderr.fileno()))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level_number)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(level_number, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            # The last processor returns the rendered line: the standard library gets one string.
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_number),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    listener.start()
    _installed = _Installed(handler, listener)


def stop_logging(timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
    """Report suppressed warnings, then let the writer empty the queue, for at most ``timeout_s``.

    Records still queued when the time runs out are taken off the queue and counted as dropped;
    the writer thread (a daemon) finishes the write it may be blocked in, then ends. Returns
    whether everything queued was written. Call from the main thread after ``trio.run`` returned.
    """
    global _installed
    installed = _installed
    if installed is None:
        return True
    flush_suppressed()
    flushed = installed.listener.stop_within(timeout_s)
    logging.getLogger().removeHandler(installed.handler)
    if not flushed:
        _count_dropped(installed.listener.abandon())
    _installed = None
    return flushed


class RateLimitedWarning:
    """One kind of warning, at most ``lines`` lines per ``interval_s``, suppressed ones counted.

    Called from the Trio thread only (it keeps plain counters). A warning past the interval's
    budget is only counted; the next interval's first warning, or :func:`flush_suppressed`, first
    prints one ``warnings suppressed`` line with ``kind`` and ``suppressed=N``.
    """

    def __init__(
        self,
        event: str,
        *,
        lines: int = RATE_LIMIT_LINES,
        interval_s: float = RATE_LIMIT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.event = event
        self._lines = lines
        self._interval_s = interval_s
        self._clock = clock
        self._log = structlog.get_logger()
        self._window_end = float("-inf")
        self._shown = 0
        self._suppressed = 0
        _limiters.add(self)

    def warning(self, **fields: Any) -> None:
        """Log ``event`` with ``fields`` if this interval's budget allows, else count it."""
        now = self._clock()
        if now >= self._window_end:
            self.flush()
            self._window_end = now + self._interval_s
            self._shown = 0
        if self._shown < self._lines:
            self._shown += 1
            self._log.warning(self.event, **fields)
        else:
            self._suppressed += 1

    def flush(self) -> None:
        """Print the count of warnings suppressed since the last such line, if any."""
        if self._suppressed:
            suppressed, self._suppressed = self._suppressed, 0
            self._log.warning(
                "warnings suppressed",
                kind=self.event,
                suppressed=suppressed,
                interval_s=self._interval_s,
            )

    def reset(self) -> None:
        """Forget the current interval and the suppressed count (tests)."""
        self._window_end = float("-inf")
        self._shown = 0
        self._suppressed = 0


_limiters: weakref.WeakSet[RateLimitedWarning] = weakref.WeakSet()


def flush_suppressed() -> None:
    """Print every rate-limited warning kind's pending ``warnings suppressed`` line (shutdown)."""
    for limiter in list(_limiters):
        limiter.flush()


def reset_rate_limits() -> None:
    """Give every rate-limited warning kind a fresh interval, forgetting suppressed counts (tests:
    the kinds are module-level, so one test's warnings would otherwise use up the next one's)."""
    for limiter in list(_limiters):
        limiter.reset()


__all__ = [
    "FLUSH_TIMEOUT_S",
    "LOG_QUEUE_RECORDS",
    "RATE_LIMIT_INTERVAL_S",
    "RATE_LIMIT_LINES",
    "RateLimitedWarning",
    "dropped_count",
    "flush_suppressed",
    "reset_rate_limits",
    "start_logging",
    "stop_logging",
]
