"""The telemetry consumer's reports of rows the database refused: throttled log lines.

A broken disk fails every row; these keep the log to one line per ``WARNING_INTERVAL_S`` per
kind, counting the occurrences held back in between and handing the count to the next line (or to
``flush`` at close). Latency rows and heartbeats get warnings; an order row is the audit trail, so
its line is an ERROR carrying the whole row. Used by ``executor.recording.consumer`` on the Trio
thread only.

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Final

import structlog

from executor.recording.rows import HeartbeatRow, OrderRow, row_fields

WARNING_INTERVAL_S: Final = 10.0
"""At most one write-failure warning per this many seconds; a broken disk must not flood the log."""

logger = structlog.get_logger()


class _Throttle:
    """At most one line per ``WARNING_INTERVAL_S``; the occurrences held back in between are
    counted and handed to the next line (a broken disk must not flood the log)."""

    def __init__(self) -> None:
        self._next_allowed = float("-inf")
        self._suppressed = 0

    def admit(self) -> int | None:
        """The count held back since the last line when one may be logged now, else None."""
        now = time.monotonic()
        if now < self._next_allowed:
            self._suppressed += 1
            return None
        self._next_allowed = now + WARNING_INTERVAL_S
        return self.take_suppressed()

    def take_suppressed(self) -> int:
        """The count held back so far, which is reset."""
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed


class FailureWarnings:
    """Throttled warnings for latency rows the database refused."""

    def __init__(self, path: Path) -> None:
        self._path = str(path)
        self._throttle = _Throttle()

    def row_dropped(self, correlation_id: str, error: str) -> None:
        """Report one dropped row, or count it towards the next report."""
        suppressed = self._throttle.admit()
        if suppressed is not None:
            logger.warning(
                "telemetry row dropped: write failed",
                path=self._path,
                correlation_id=correlation_id,
                error=error,
                suppressed=suppressed,
            )

    def flush(self) -> None:
        """Report the drops held back since the last warning, if any."""
        suppressed = self._throttle.take_suppressed()
        if suppressed:
            logger.warning(
                "telemetry rows dropped: write failed", path=self._path, suppressed=suppressed
            )


class OrderFailureLog:
    """Throttled ERROR lines, with the row, for order rows the database refused; throttled
    warnings for heartbeats."""

    def __init__(self, path: Path) -> None:
        self._path = str(path)
        self._orders = _Throttle()
        self._heartbeats = _Throttle()

    def order_dropped(self, row: OrderRow, error: str) -> None:
        """Report one dropped order row with its content, or count it towards the next report."""
        suppressed = self._orders.admit()
        if suppressed is not None:
            logger.error(
                "order row dropped: write failed",
                path=self._path,
                row=row_fields(row),
                error=error,
                suppressed=suppressed,
            )

    def heartbeat_dropped(self, row: HeartbeatRow, error: str) -> None:
        """One warning per interval for heartbeats that could not be written."""
        if self._heartbeats.admit() is not None:
            logger.warning(
                "heartbeat row dropped: write failed", path=self._path, row=asdict(row), error=error
            )

    def flush(self) -> None:
        """Report the order drops held back since the last line, if any."""
        suppressed = self._orders.take_suppressed()
        if suppressed:
            logger.error("order rows dropped: write failed", path=self._path, suppressed=suppressed)


__all__ = ["WARNING_INTERVAL_S", "FailureWarnings", "OrderFailureLog"]
