"""The shadow lane: where shadow fires are signed, one at a time, behind every real fire.

A shadow fire (``dry_run``) is built in its own fire task and then offered to this lane: a bounded
memory channel drained by one task, which signs each queued order through the transport
(``place_order(..., dry_run=True)`` stops right after the ``sent`` stamp, before any network I/O),
runs the job's ``finish`` callback (its stage rows) and passes through the scheduler before the
next one. By default the transport hands a shadow order's signature to a worker process
(``executor.exchange.orders.sign_worker``), so the lane waits on a pipe while the loop serves
everyone else. With ``--shadow-signing loop`` the signature is made on the loop and holds the GIL
for 0.2-1.3 ms; with one signer and a checkpoint between jobs, a real fire task that becomes
runnable then waits for at most one shadow signature, never for a queue of them. When the channel is
full the offer fails and the fire path skips the shadow fire before signing (``shadow_skipped``): a
lost measurement costs nothing, a late order does.

With signatures made ahead (``--presign-max-age-ms``), a shadow fire that finds a spare one in the
pool is finished at once, inside :meth:`ShadowLane.offer` (no signing is left to defer: the
request is built from the template and stamped); only the others queue here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import structlog
import trio

from executor.exchange.messages import OrderStamps
from executor.exchange.orders.dispatcher import OrderPlacer
from executor.exchange.orders.stages import FireStamps
from executor.runtime.idle_loop import load_idle_signal, until_the_loop_is_idle

log = structlog.get_logger()

MAX_DEFER_S: Final = 0.050
"""Longest a job waits for an idle loop (seconds). Past it the lane signs anyway, so a loop that
never goes idle still gets one shadow measurement per ~50 ms; a guess."""

SHADOW_LANE_CAPACITY: Final = 16
"""Shadow fires that may wait to be signed (jobs). 16 x 0.3 ms is ~5 ms of signing: deeper than a
normal burst of shadow wakes, shallow enough that a flood is skipped rather than measured late.
A guess, not a measurement."""


@dataclass(frozen=True, slots=True)
class ShadowJob:
    """One built shadow order waiting to be signed.

    Attributes:
        body: the order's JSON bytes, built exactly like a real order's.
        stamps: the fire's stamps; the transport fills ``stamps.order``.
        finish: called once the job is done (signed, failed or dropped at shutdown); records the
            stage rows. Must not raise.
    """

    body: bytes
    stamps: FireStamps
    finish: Callable[[], None]


class ShadowLane:
    """A bounded queue of shadow orders and the task that signs them.

    Args:
        client: the transport (only ``place_order(..., dry_run=True)`` is used).
        capacity: jobs that may wait.
        presigned: finishes a shadow order at once with a signature made ahead, or returns False
            (``ExchangeClient.place_shadow_now``); None = every job queues.
    """

    def __init__(
        self,
        client: OrderPlacer,
        capacity: int = SHADOW_LANE_CAPACITY,
        *,
        presigned: Callable[[bytes, OrderStamps], bool] | None = None,
    ) -> None:
        self._client = client
        self._presigned = presigned
        self._send, self._receive = trio.open_memory_channel[ShadowJob](capacity)
        self.signed = 0

    def offer(self, job: ShadowJob) -> bool:
        """Finish ``job`` now with a spare presigned signature, or queue it without waiting;
        False when neither (the lane is full or closed)."""
        if self._presigned is not None and self._presigned(job.body, job.stamps.order):
            self.signed += 1
            job.finish()
            return True
        try:
            self._send.send_nowait(job)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def close(self) -> None:
        """Accept no more jobs; ``run`` signs what is queued and returns."""
        self._send.close()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sign queued jobs one at a time until the lane is closed and empty.

        Cancellation: jobs still queued are finished unsigned (their ``order_build`` row is still
        written) so no fire's rows are lost.
        """
        load_idle_signal()  # as the lane starts, before the socket is reachable
        task_status.started()
        try:
            async for job in self._receive:
                # A burst keeps the connection tasks busy; signing then, even in a worker process,
                # costs them the worker's CPU. The jobs that do not fit in the lane meanwhile are
                # skipped and counted (``shadow_skipped``).
                await until_the_loop_is_idle(MAX_DEFER_S)
                try:
                    await self._client.place_order(job.body, job.stamps.order, dry_run=True)
                    self.signed += 1
                except Exception:
                    log.exception("shadow fire failed to sign")
                finally:
                    job.finish()
                # One signature per pass through the scheduler: a real fire interleaves.
                await trio.lowlevel.checkpoint()
        finally:
            self._finish_unsigned()
            self._receive.close()

    def _finish_unsigned(self) -> None:
        while True:
            try:
                job = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            job.finish()
