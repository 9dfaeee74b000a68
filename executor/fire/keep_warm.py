"""Keeping a real order's path warm between real fires (``executor serve --keep-warm SECONDS``).

Real fires are rare, and the executor sleeps between them. After a sleep of ~150 ms the machine
runs the order's path from cold caches: the real decision takes ~150 µs where the same call made
again at once takes ~9, and a TLS encryption or a loopback ``send`` 4-27x its hot time (measured in
docs/performance/notebook/, 2026-12-04, "a real order's path after a sleep"). With an interval set,
a task *rehearses* the most recent real wake once per interval in which no real wake came: the wake
is encoded and decoded again, decided again, and the order's intent-record fields and body are built
again (``FirePath.rehearse``), and everything is thrown away. A rehearsal draws no
``client_order_id``, records no risk-gate attempt, writes no row and no file, sends nothing and
counts nothing but itself; it runs on the event loop like any frame, so a wake that arrives during
one waits for it (tens of µs).

What it cannot warm: the CPU's own wake-up, the intent record's ``os.write``, and the kernel's and
OpenSSL's half of the order's ``send``. Measured with the executor alone on its CPU (the bench's
pinned placement) it took a quiet real fire's ``detect_wire`` p50 down 10-26%; with the scheduler
placing every process (unpinned) it made it 1.01-2.45x slower (at worst, the executor's CPU, awake
every interval, was where the kernel ran the local fake exchange its order woke, inside the
executor's ``send``). So it is off by default, and meant for an executor pinned to a CPU of its
own (``--cpu``) with nothing else that its order wakes there.

A rehearsal that raises is logged once and stops the rehearsals (one that failed would fail
again); it never touches a real fire.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import msgspec
import structlog
import trio

from executor.wire.protocol import WakeMessage, decode_wake, wake_message_of

log = structlog.get_logger()


class Rehearsable(Protocol):
    """What a rehearsal runs (``executor.fire.path.FirePath``)."""

    def rehearse(self, message: WakeMessage) -> None: ...


class KeepWarm:
    """Rehearses the last real wake once per quiet interval; inert when the interval is 0.

    Args:
        interval_s: seconds without a real wake before each rehearsal; 0 turns it off.

    Attributes:
        rehearsals: rehearsals finished.
        failed: whether a rehearsal raised (and the rehearsals stopped).
    """

    def __init__(self, interval_s: float) -> None:
        if not (math.isfinite(interval_s) and interval_s >= 0):
            raise ValueError(f"interval_s must be a finite number, 0 or more, got {interval_s!r}")
        self.interval_s = interval_s
        self.rehearsals = 0
        self.failed = False
        self._message: WakeMessage | None = None
        self._real_at = -math.inf
        self._frame: tuple[WakeMessage, bytes] | None = None  # the last one rehearsed, encoded

    @property
    def enabled(self) -> bool:
        """Whether rehearsals run at all."""
        return self.interval_s > 0 and not self.failed

    def note(self, message: WakeMessage) -> None:
        """Remember ``message`` if it is a real wake (called once its fire has started)."""
        if not message.dry_run and self.interval_s > 0:
            self._message = message
            self._real_at = trio.current_time()

    async def run(self, fire_path: Callable[[], Rehearsable], stopping: trio.Event) -> None:
        """Rehearse once per interval without a real wake, until ``stopping`` is set.

        Args:
            fire_path: the fire path in use, read at each rehearsal.
            stopping: set when the server shuts down; the task then returns at once.
        """
        if not self.enabled:
            return
        log.info("keeping the order path warm", interval_s=self.interval_s)
        try:
            while self.enabled:
                with trio.move_on_after(self.interval_s):
                    await stopping.wait()
                    return
                message = self._message
                if message is not None and trio.current_time() - self._real_at >= self.interval_s:
                    self.rehearse(fire_path(), message)
        finally:
            log.info("keep-warm stopped", rehearsals=self.rehearsals, failed=self.failed)

    def rehearse(self, fire_path: Rehearsable, message: WakeMessage) -> None:
        """One rehearsal of ``message``: its frame body decoded again, then ``fire_path``'s."""
        try:
            if self._frame is None or self._frame[0] is not message:
                self._frame = (message, msgspec.json.encode(message))  # once per real wake
            again = wake_message_of(decode_wake(self._frame[1]))
            fire_path.rehearse(again)
        except Exception:
            self.failed = True
            log.exception(
                "keep-warm rehearsal failed; no more rehearsals",
                correlation_id=message.correlation_id,
            )
            return
        self.rehearsals += 1


__all__ = ["KeepWarm", "Rehearsable"]
