"""Signatures made ahead: a worker process keeps a few order signatures ready for the next fire.

Kalshi's signature covers ``timestamp + "POST" + path``, not the body (SIGNER.md), so the one an
order needs can exist before the wake does. :class:`SignaturePool` keeps up to ``size`` of them,
made one at a time in a worker process (``executor.exchange.orders.sign_worker``, so the RSA work
never holds the event loop's GIL), each for a timestamp read just before it was made. A fire takes
the **freshest** unused one, at most ``max_age_ms`` old (DISPATCH.md §10; default 100 ms), or signs
inline when none is fresh enough; each signature is handed out once and forgotten.

Refill: after every take, and whenever the newest signature is older than ``max_age_ms / size``,
the worker makes one more and the oldest beyond ``size`` is dropped. So at rest the pool holds
signatures about ``max_age_ms / size`` apart, the freshest at most that old, at a cost of
``size / max_age_ms`` signatures a second in the worker (40/s with the defaults, ~4% of a core).

A refill that no real fire is short of (at least ``reserve`` fresh signatures ready) waits for
an idle loop (``executor.runtime.idle_loop``), at most ``MAX_IDLE_WAIT_S`` and never so long
that the newest signature would come within ``max_age_ms / size`` of its age limit: during a burst
of shadow wakes, each taking a spare, refilling at once kept the worker signing for the whole burst,
on the cores the connection and the real order in it needed (docs/performance/notebook/ 2026-12-02).
Below the reserve a refill starts at once.

While a real order that took a signature is in flight (:meth:`SignaturePool.take` until
:meth:`SignaturePool.order_done`), refills wait (at most ``MAX_REFILL_PAUSE_S``) unless the pool is
empty: on a machine with few cores the worker's RSA work would otherwise compete with the order's
round trip for the CPU (measured: the round trip 14% slower, docs/performance/notebook/ 2026-12-01).

Shadow fires use the same pool, but only above a reserve kept for real fires
(:meth:`SignaturePool.take_spare`), and they take the *oldest* fresh signature: a burst of
shadow wakes can never leave a real fire to sign inline.

Signatures are secrets: nothing here logs or writes one (only counts).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
import trio

from executor.clock import wall_ms
from executor.config.settings import DEFAULT_PRESIGN_MAX_AGE_MS
from executor.exchange.messages import ORDER_PATH
from executor.runtime.idle_loop import load_idle_signal, until_the_loop_is_idle

log = structlog.get_logger()

POOL_SIZE: Final = 4
"""Signatures kept ready: two for real fires (the risk gate's default in-flight limit) and two
spare for shadow fires."""
RESERVED_FOR_REAL: Final = 2
"""Signatures a shadow fire never takes: the pool's last ones are for real orders."""
MAX_REFILL_PAUSE_S: Final = 0.050
"""Longest a refill waits for the real orders in flight to finish (seconds): an order's round
trip on a healthy exchange, with room; a hung order must not stop the pool from refilling."""
MAX_IDLE_WAIT_S: Final = 0.050
"""Longest a refill that no real fire is short of waits for an idle loop (seconds): a burst of
wakes lasts a few milliseconds; a loop busy longer than this still gets its spares. A guess."""
FAILURE_BACKOFF_S: Final = 1.0
"""Wait after the worker failed to sign (seconds) before retrying; fires sign inline meanwhile."""

AsyncSign = Callable[[str, str, str], Awaitable[str]]
"""``(timestamp, method, path) -> signature``, made elsewhere (the worker process)."""


class SignaturePool:
    """Order signatures made ahead; :meth:`run` keeps it filled.

    Args:
        sign: signs in the worker process.
        max_age_ms: oldest a signature may be when taken (ms, >= 1).
        size: signatures kept.
        reserve: of those, how many only real fires may take.
        clock: wall-clock milliseconds (tests pass their own).
        max_idle_wait_s: longest a refill no real fire is short of waits for an idle loop.

    Attributes:
        made: signatures the worker made; ``expired`` of them were dropped unused (too old);
        ``taken`` went to real fires, ``taken_spare`` to shadow fires; ``failures`` counts failed
        worker calls.
    """

    def __init__(
        self,
        sign: AsyncSign,
        *,
        max_age_ms: int = DEFAULT_PRESIGN_MAX_AGE_MS,
        size: int = POOL_SIZE,
        reserve: int = RESERVED_FOR_REAL,
        clock: Callable[[], int] = wall_ms,
        max_idle_wait_s: float = MAX_IDLE_WAIT_S,
    ) -> None:
        if max_age_ms < 1 or size < 1 or not 0 <= reserve <= size:
            raise ValueError(
                f"signature pool: max_age_ms={max_age_ms} size={size} reserve={reserve}"
            )
        self._sign = sign
        self.max_age_ms = max_age_ms
        self.size = size
        self.reserve = reserve
        self._clock = clock
        self._max_idle_wait_s = max_idle_wait_s
        self._ready: collections.deque[tuple[int, str, str]] = collections.deque()  # oldest first
        self._wanted = trio.Event()
        self._no_order_in_flight = trio.Event()
        self._no_order_in_flight.set()
        self.in_flight = 0
        self.made = self.expired = self.taken = self.taken_spare = self.failures = 0

    def __len__(self) -> int:
        return len(self._ready)

    def ready_timestamps(self) -> list[str]:
        """The timestamps of the signatures ready, oldest first (timestamps are no secret)."""
        return [timestamp for _, timestamp, _ in self._ready]

    def take(self) -> tuple[str, str] | None:
        """``(timestamp, signature)``, the freshest unused one no older than ``max_age_ms``, or
        None when there is none (the caller signs inline)."""
        self._drop_expired()
        if not self._ready:
            return None
        _, timestamp, signature = self._ready.pop()
        self.taken += 1
        self.in_flight += 1
        if self.in_flight == 1:
            self._no_order_in_flight = trio.Event()
        self._wanted.set()
        return timestamp, signature

    def order_done(self) -> None:
        """The real order that :meth:`take` served has its answer (or failed): refills resume."""
        self.in_flight = max(0, self.in_flight - 1)
        if self.in_flight == 0:
            self._no_order_in_flight.set()

    def take_spare(self) -> tuple[str, str] | None:
        """For a shadow fire: the oldest fresh one, only while more than ``reserve`` are ready."""
        self._drop_expired()
        if len(self._ready) <= self.reserve:
            return None
        _, timestamp, signature = self._ready.popleft()
        self.taken_spare += 1
        self._wanted.set()
        return timestamp, signature

    def _drop_expired(self) -> None:
        oldest_allowed = self._clock() - self.max_age_ms
        while self._ready and self._ready[0][0] < oldest_allowed:
            self._ready.popleft()
            self.expired += 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the pool filled until cancelled; ``started`` once the first signature is ready
        (or the first attempt failed).

        A failed worker call is logged (rate-limited by the back-off) and retried; fires sign
        inline meanwhile. This task never raises for it.

        Cancellation: a signature being made in the worker completes first (it is short).
        """
        load_idle_signal()  # as the pool starts, before the socket is reachable
        started = False
        while True:
            if self._needs_one():
                if self._ready and not self._no_order_in_flight.is_set():
                    with trio.move_on_after(MAX_REFILL_PAUSE_S):
                        await self._no_order_in_flight.wait()
                await until_the_loop_is_idle(self._idle_wait_s())
                try:
                    await self._make_one()
                except Exception as error:  # the worker's failure is not the executor's
                    self.failures += 1
                    log.warning("presigning failed; fires sign inline", error=repr(error))
                    if not started:
                        task_status.started()
                        started = True
                    await trio.sleep(FAILURE_BACKOFF_S)
                    continue
                if not started:
                    task_status.started()
                    started = True
                continue
            with trio.move_on_after(self._seconds_until_next()):
                await self._wanted.wait()
            self._wanted = trio.Event()

    def _needs_one(self) -> bool:
        self._drop_expired()
        if len(self._ready) < self.size:
            return True
        return self._clock() - self._ready[-1][0] >= self.max_age_ms / self.size

    def _idle_wait_s(self) -> float:
        """How long the next refill may wait for an idle loop (seconds; 0: start it now).

        Zero while fewer than ``reserve`` (and at least one) fresh signatures are ready; else up
        to ``max_idle_wait_s``, ending before the newest is ``max_age_ms / size`` from too old.
        """
        self._drop_expired()
        if len(self._ready) < max(self.reserve, 1):
            return 0.0
        newest_age_ms = self._clock() - self._ready[-1][0]
        left_ms = self.max_age_ms - self.max_age_ms / self.size - newest_age_ms
        return max(0.0, min(self._max_idle_wait_s, left_ms / 1000))

    def _seconds_until_next(self) -> float:
        newest_age_ms = self._clock() - self._ready[-1][0]
        return max(0.0, self.max_age_ms / self.size - newest_age_ms) / 1000

    async def _make_one(self) -> None:
        stamped_ms = self._clock()
        signature = await self._sign(str(stamped_ms), "POST", ORDER_PATH)
        self.made += 1
        self._ready.append((stamped_ms, str(stamped_ms), signature))
        while len(self._ready) > self.size:
            self._ready.popleft()
            self.expired += 1
