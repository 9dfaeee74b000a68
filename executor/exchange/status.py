"""The exchange's status: ``GET /exchange/status``, read at start-up and then polled.

Kalshi pauses trading every Thursday 03:00-05:00 ET and whenever it must, and in rare cases
pauses the whole exchange (``getting_started/maintenance_and_pauses``). The published
``ExchangeStatus`` says which (``exchange_active``, ``trading_active``,
``exchange_estimated_resume_time``). :class:`StatusWatch` reads it before the executor serves,
then every ``STATUS_POLL_S`` (``PAUSED_POLL_S`` while paused, so fires resume soon after the
pause ends), and at once when an order's refusal says trading is paused (:meth:`StatusWatch.want`,
called by :class:`~executor.exchange.halts.ExchangeHalts`). What it reads goes to the halts,
which the decision consults; a read that fails is logged (rate-limited) and counted, and the last
status stands.
"""

from __future__ import annotations

from typing import Any, Final

import structlog
import trio

from executor.exchange.halts import ExchangeHalts
from executor.exchange.messages import ExchangeError
from executor.exchange.protocols import SignedReader
from executor.logs import RateLimitedWarning

log = structlog.get_logger()

EXCHANGE_STATUS_PATH: Final = "/trade-api/v2/exchange/status"
"""The published status endpoint (no authentication needed; signed like every read here)."""

STATUS_POLL_S: Final = 30.0
"""Seconds between status reads while trading is active: a pause the poll misses costs at most
this long of orders refused one by one (each refusal also asks for a read at once). A guess: one
read token per 30 s is nothing next to the account poll."""

PAUSED_POLL_S: Final = 5.0
"""Seconds between status reads during a pause: how late real fires resume after it ends."""

_read_failed: Final = RateLimitedWarning("exchange status not read: the last status stands")


class StatusError(ValueError):
    """A status answer that is not the published ``ExchangeStatus``."""


def parse_status(payload: dict[str, Any]) -> tuple[bool, bool, str | None]:
    """``(exchange_active, trading_active, exchange_estimated_resume_time)`` of an answer.

    Raises:
        StatusError: either flag missing or not a boolean.
    """
    exchange_active = payload.get("exchange_active")
    trading_active = payload.get("trading_active")
    if not isinstance(exchange_active, bool) or not isinstance(trading_active, bool):
        raise StatusError(f"exchange status without its two flags: {payload!r:.200}")
    resume = payload.get("exchange_estimated_resume_time")
    return exchange_active, trading_active, resume if isinstance(resume, str) else None


class StatusWatch:
    """Keeps :class:`ExchangeHalts` told of the exchange's status.

    Attributes:
        reads: statuses read; failures: reads that failed (the last status stood).
    """

    def __init__(self) -> None:
        self.reads = 0
        self.failures = 0
        self._wanted = trio.Event()

    def want(self) -> None:
        """Read the status now (an order's refusal said trading is paused). Never checkpoints."""
        self._wanted.set()

    async def read_once(self, reader: SignedReader, halts: ExchangeHalts) -> bool:
        """Read the status once and tell ``halts``; whether it was read."""
        try:
            payload = await reader.get_json(EXCHANGE_STATUS_PATH)
            exchange_active, trading_active, resume = parse_status(payload)
        except (ExchangeError, StatusError) as error:
            self.failures += 1
            _read_failed.warning(error=str(error))
            return False
        self.reads += 1
        halts.hear_status(
            exchange_active=exchange_active, trading_active=trading_active, resume_time=resume
        )
        return True

    async def run(
        self,
        reader: SignedReader,
        halts: ExchangeHalts,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read now, report started, then read every poll interval (or when wanted) until
        cancelled."""
        await self.read_once(reader, halts)
        task_status.started()
        while True:
            with trio.move_on_after(PAUSED_POLL_S if halts.paused else STATUS_POLL_S):
                await self._wanted.wait()
            self._wanted = trio.Event()
            await self.read_once(reader, halts)


__all__ = [
    "EXCHANGE_STATUS_PATH",
    "PAUSED_POLL_S",
    "STATUS_POLL_S",
    "StatusError",
    "StatusWatch",
    "parse_status",
]
