"""The stream connection's life in numbers, and a wait for their next change.

:func:`executor.exchange.stream.client.serve_stream` moves it; the exit line, the gauges and the
dashboard read it (``executor.trading.counters``); a watcher that needs the stream up (a test, a
start-up check) waits on :meth:`StreamState.wait_changed` instead of polling it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio


@dataclass
class StreamState:
    """The connection's life in numbers (the exit line's and the gauge's).

    Attributes:
        connected: 1 while connected, subscribed and reconciled (the stream is trusted), else 0.
        connects: connections that reached the subscription; reconnects: those after the first.
        failures: attempts or connections that ended in an error.
    """

    connected: int = 0
    connects: int = 0
    failures: int = 0
    _changed: trio.Event = field(default_factory=trio.Event, repr=False, compare=False)

    @property
    def reconnects(self) -> int:
        """Connections after the first."""
        return max(0, self.connects - 1)

    def note(self, *, connected: int, connects: int = 0, failures: int = 0) -> None:
        """Set ``connected``, add to the counts, and wake every :meth:`wait_changed`."""
        self.connected = connected
        self.connects += connects
        self.failures += failures
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        """Wait for the next :meth:`note` (a watcher waits on this rather than polling)."""
        await self._changed.wait()


__all__ = ["StreamState"]
