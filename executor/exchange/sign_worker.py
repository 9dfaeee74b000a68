"""Signatures in a worker process, so signing never holds the event loop's GIL.

An RSA-2048 PSS signature takes 0.2-1.3 ms of CPU here, and cryptography holds the GIL while it
runs: signed on the event-loop thread (or any thread of this process), every connection waits for
it. A shadow fire's signature is only there to be measured, so it is made in a trio-parallel worker
process instead: the loop pays for pickling a few short strings and a pipe round trip, the worker
pays for the signature. A real fire never waits for that round trip: it takes a signature made
ahead by another worker (``executor.exchange.presign``, which uses this module too), or signs in
its own task on the loop when none is fresh enough.

The worker loads the private key from its file once, on its first job, and keeps it for its life.
:meth:`ProcessSigner.warm_up` makes that first job happen at start-up, before the socket is bound,
so the first shadow fire does not pay for starting a Python process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import trio
import trio_parallel  # type: ignore[import-untyped]  # ships no type information

from executor.clock import wall_ms
from executor.signer import KalshiSigner

WORKER_IDLE_TIMEOUT_S: Final = 24 * 3600.0
"""A signing worker idle this long exits (seconds). Longer than any quiet spell worth pre-warming
for: a restarted worker costs its first shadow fire a process start (~100 ms)."""

_signers: dict[tuple[str, str], KalshiSigner] = {}
"""In a worker process: the keys it has loaded, by (path, key id)."""


def _sign_in_worker(key_path: str, key_id: str, timestamp: str, method: str, path: str) -> str:
    """Runs in the worker process: sign with the key at ``key_path``, loading it once."""
    signer = _signers.get((key_path, key_id))
    if signer is None:
        signer = _signers[(key_path, key_id)] = KalshiSigner(key_path, key_id)
    return signer.sign(timestamp, method, path)


class ProcessSigner:
    """Signs in one worker process, one signature at a time.

    Args:
        context: the trio-parallel worker context that owns the process.
        key_path: the private key's PEM file (read by the worker).
        key_id: the API key id (carried along; the signature does not depend on it).
    """

    def __init__(self, context: trio_parallel.WorkerContext, key_path: Path, key_id: str) -> None:
        self._context = context
        self._key_path = str(key_path)
        self._key_id = key_id
        self._one_at_a_time = trio.CapacityLimiter(1)

    async def sign(self, timestamp: str, method: str, path: str) -> str:
        """The signature :meth:`KalshiSigner.sign` would make, made in the worker.

        Raises:
            trio_parallel.BrokenWorkerError: the worker died.
            SignerKeyError: the worker could not load the key.

        Cancellation: a signature already in the worker completes first (it is short).
        """
        signature: str = await self._context.run_sync(
            _sign_in_worker,
            self._key_path,
            self._key_id,
            timestamp,
            method,
            path,
            limiter=self._one_at_a_time,
        )
        return signature

    async def warm_up(self) -> None:
        """Start the worker and load the key there now, not on the first shadow fire."""
        await self.sign(str(wall_ms()), "GET", "/trade-api/v2/portfolio/balance")


@asynccontextmanager
async def open_process_signer(key_path: Path, key_id: str) -> AsyncIterator[ProcessSigner]:
    """A warmed-up :class:`ProcessSigner`; its worker process ends when the block does."""
    async with trio_parallel.open_worker_context(idle_timeout=WORKER_IDLE_TIMEOUT_S) as context:
        signer = ProcessSigner(context, key_path, key_id)
        await signer.warm_up()
        yield signer
