"""What the server is given: the order path's two stages, in the order it enters them.

:class:`OrderPathFactory` holds the settings the order path is built from; the server enters
``exchange_side()`` (stage one, ``executor.trading.exchange_side``) before the database is opened
and calls the factory with its telemetry (stage two, ``executor.trading.assembly``) after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from executor.config.settings import Settings
from executor.decide.decision import KillSwitchState
from executor.fire.path import FirePath
from executor.recording.heartbeat import (
    HEARTBEAT_INTERVAL_S,
    HEARTBEAT_PROCESS,
    heartbeat_process_for,
)
from executor.signer import KalshiSigner
from executor.telemetry import Telemetry
from executor.trading.assembly import open_order_path
from executor.trading.exchange_side import ExchangeSide, open_exchange_side


class OrderPathFactory:
    """What the server is given: the two stages of the order path, in the order it enters them.

    ``exchange_side()`` first (before the database is opened), then ``factory(telemetry)`` (after);
    called alone, ``factory(telemetry)`` opens the exchange side itself.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        telemetry_db: Path,
        kill_switch: KillSwitchState | None,
        signer: KalshiSigner | None = None,
        announce: Callable[[str], None] | None = None,
        socket_path: Path | None = None,
    ) -> None:
        self.settings = settings
        self.telemetry_db = telemetry_db
        self.kill_switch = kill_switch
        self.signer = signer
        self.announce = announce
        self.heartbeat_interval_s = HEARTBEAT_INTERVAL_S
        """Seconds between heartbeat rows (a test shortens it: a heartbeat that is written is
        what ends an audit-trail outage)."""
        self.heartbeat_process = (
            HEARTBEAT_PROCESS if socket_path is None else heartbeat_process_for(socket_path)
        )
        """The heartbeat row's ``process``: the instance, named by its socket."""
        self._side: ExchangeSide | None = None

    @asynccontextmanager
    async def exchange_side(self) -> AsyncIterator[ExchangeSide]:
        """Stage one (:func:`open_exchange_side`), kept for the second stage to use."""
        async with open_exchange_side(
            self.settings, signer=self.signer, announce=self.announce
        ) as side:
            self._side = side
            try:
                yield side
            finally:
                self._side = None

    def __call__(self, telemetry: Telemetry) -> AbstractAsyncContextManager[FirePath]:
        """Stage two (:func:`open_order_path`) over the exchange side, if one is open."""
        return open_order_path(
            self.settings,
            telemetry,
            telemetry_db=self.telemetry_db,
            kill_switch=self.kill_switch,
            signer=self.signer,
            announce=self.announce,
            side=self._side,
            heartbeat_interval_s=self.heartbeat_interval_s,
            heartbeat_process=self.heartbeat_process,
        )


__all__ = ["OrderPathFactory"]
