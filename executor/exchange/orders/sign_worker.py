"""Signatures in a worker process, so signing never holds the event loop's GIL.

An RSA-2048 PSS signature takes 0.2-1.3 ms of CPU here, and cryptography holds the GIL while it
runs: signed on the event-loop thread (or any thread of this process), every connection waits for
it. A shadow fire's signature is only there to be measured, so it is made in a trio-parallel worker
process instead: the loop pays for pickling a few short strings and a pipe round trip, the worker
pays for the signature. A real fire never waits for that round trip: it takes a signature made
ahead by another worker (``executor.exchange.orders.presign``, which uses this module too), or signs
in its own task on the loop when none is fresh enough.

The worker loads the private key from its file once, on its first job, and keeps it for its life.
:meth:`ProcessSigner.warm_up` makes that first job happen at start-up, before the socket is bound,
so the first shadow fire does not pay for starting a Python process.

Signals: the worker is in the executor's process group, so a SIGINT or SIGTERM sent to the whole
group (a terminal's Ctrl-C, ``kill -- -PGID``, systemd's ``KillMode=control-group``) reaches it
too. Its initializer ignores both: the executor alone decides when to stop, and stops the worker by
closing its context (the worker sees its job pipe close and exits). A worker that dies anyway (a
SIGKILL, a crash) is counted and logged once: a job it was running is signed on the loop by the
fallback signer, and the next job starts a new worker (trio-parallel replaces a dead one; a change
of the worker's pid is how a death between jobs is noticed). A worker that cannot start is one
warning line, and shadow fires then sign on the loop for the rest of the run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import structlog
import trio
import trio_parallel  # type: ignore[import-untyped]  # ships no type information

from executor.clock import wall_ms
from executor.runtime.signals import GROUP_RESET_SIGNAL
from executor.signer import KalshiSigner

log = structlog.get_logger()

WORKER_IDLE_TIMEOUT_S: Final = 24 * 3600.0
"""A signing worker idle this long exits (seconds). Longer than any quiet spell worth pre-warming
for: a restarted worker costs its first shadow fire a process start (~100 ms)."""

WORKER_GRACE_S: Final = 2.0
"""How long closing the context waits for the worker to exit before killing it (seconds). An idle
worker exits as soon as its pipe closes; a job in it is one signature (~1 ms)."""

OPERATOR_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, GROUP_RESET_SIGNAL)
"""The signals an operator sends the executor (to stop it; ``executor group reset``'s); the worker
leaves them to the executor, also when they are sent to the whole process group."""

_signers: dict[tuple[str, str], KalshiSigner] = {}
"""In a worker process: the keys it has loaded, by (path, key id)."""

LoopSign = Callable[[str, str, str], str]
"""``(timestamp, method, path) -> signature`` on the loop: the fallback when the worker is gone."""


def ignore_operator_signals() -> None:
    """Runs in the worker process as it starts: the operator's signals are the executor's."""
    for signum in OPERATOR_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _sign_in_worker(
    key_path: str, key_id: str, timestamp: str, method: str, path: str
) -> tuple[int, str]:
    """Runs in the worker process: (its pid, the signature with the key at ``key_path``)."""
    signer = _signers.get((key_path, key_id))
    if signer is None:
        signer = _signers[(key_path, key_id)] = KalshiSigner(key_path, key_id)
    return os.getpid(), signer.sign(timestamp, method, path)


class ProcessSigner:
    """Signs in one worker process, one signature at a time.

    Args:
        context: the trio-parallel worker context that owns the process.
        key_path: the private key's PEM file (read by the worker).
        key_id: the API key id (carried along; the signature does not depend on it).
        fallback: signs on the loop when the worker dies during a job or cannot start; None
            lets the worker's error propagate.

    Attributes:
        worker_failures: workers that died (during a job or between jobs) or could not start.
        loop_signatures: signatures the fallback made instead of a worker.
        on_loop: the worker could not start; every signature is made by the fallback.
        worker_pid: the pid of the worker that made the last signature (None before the first).
    """

    def __init__(
        self,
        context: trio_parallel.WorkerContext,
        key_path: Path,
        key_id: str,
        fallback: LoopSign | None = None,
    ) -> None:
        self._context = context
        self._key_path = str(key_path)
        self._key_id = key_id
        self._fallback = fallback
        self._one_at_a_time = trio.CapacityLimiter(1)
        self.worker_failures = 0
        self.loop_signatures = 0
        self.on_loop = False
        self.worker_pid: int | None = None

    async def sign(self, timestamp: str, method: str, path: str) -> str:
        """The signature :meth:`KalshiSigner.sign` would make, made in the worker.

        Raises:
            trio_parallel.BrokenWorkerError: the worker died and there is no fallback.
            SignerKeyError: the worker could not load the key.

        Cancellation: a signature already in the worker completes first (it is short).
        """
        if self.on_loop and self._fallback is not None:
            self.loop_signatures += 1
            return self._fallback(timestamp, method, path)
        try:
            pid, signature = await self._run(timestamp, method, path)
        except trio_parallel.BrokenWorkerError as error:
            if self._fallback is None:
                raise
            self._worker_lost("shadow signing worker died during a signature", error)
            self.worker_pid = None
            self.loop_signatures += 1
            return self._fallback(timestamp, method, path)
        if self.worker_pid is not None and pid != self.worker_pid:
            self._worker_lost("shadow signing worker died between signatures", None, new_pid=pid)
        self.worker_pid = pid
        return signature

    async def warm_up(self) -> None:
        """Start the worker and load the key there now, not on the first shadow fire.

        A worker that cannot start, with a fallback, is one warning line and leaves the signer
        ``on_loop``.

        Raises:
            trio_parallel.BrokenWorkerError: the worker cannot start and there is no fallback.
            SignerKeyError: the worker could not load the key.
        """
        try:
            await self._run(str(wall_ms()), "GET", "/trade-api/v2/portfolio/balance")
        except trio_parallel.BrokenWorkerError as error:
            if self._fallback is None:
                raise
            self.worker_failures += 1
            self.on_loop = True
            log.warning(
                "shadow signing worker could not start: shadow fires sign on the loop",
                error=one_line(error),
            )

    async def _run(self, timestamp: str, method: str, path: str) -> tuple[int, str]:
        pid, signature = await self._context.run_sync(
            _sign_in_worker,
            self._key_path,
            self._key_id,
            timestamp,
            method,
            path,
            limiter=self._one_at_a_time,
        )
        return int(pid), str(signature)

    def _worker_lost(
        self, event: str, error: BaseException | None, *, new_pid: int | None = None
    ) -> None:
        self.worker_failures += 1
        log.warning(
            event,
            worker_pid=self.worker_pid,
            replaced_by=new_pid,
            worker_failures=self.worker_failures,
            error=None if error is None else one_line(error),
        )


def one_line(error: BaseException) -> str:
    """``Type: first line of the message``: a worker's error is a line, not its repr dump."""
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@asynccontextmanager
async def open_process_signer(
    key_path: Path, key_id: str, fallback: LoopSign | None = None
) -> AsyncIterator[ProcessSigner]:
    """A warmed-up :class:`ProcessSigner`; its worker process ends when the block does.

    A worker found dead when the block ends (the context reports an unclean exit) is one
    warning line, not an error: the executor is stopping anyway, and every signature it owed was
    made (by the fallback if need be). An error raised inside the block propagates unchanged.
    """
    closing = False
    body_error: BaseException | None = None
    try:
        async with trio_parallel.open_worker_context(
            idle_timeout=WORKER_IDLE_TIMEOUT_S,
            init=ignore_operator_signals,
            grace_period=WORKER_GRACE_S,
        ) as context:
            signer = ProcessSigner(context, key_path, key_id, fallback)
            await signer.warm_up()
            try:
                yield signer
            except BaseException as error:
                body_error = error
                raise
            finally:
                closing = True
    except trio_parallel.BrokenWorkerError as error:
        if not closing:
            raise
        log.warning("shadow signing worker had already exited at shutdown", error=one_line(error))
        if body_error is not None:
            raise body_error from None
