"""The reference poller's own burst: its queue bound and its drop policy, so a lost wake is counted.

The ``burst-*`` clients block in ``put`` when their 64-deep queue is full, so they never lose a
wake; the reference's poller (``IPCPollerClient.send_wake`` in anaborne/prediction-market-infra)
never blocks its caller: it enqueues with ``put_nowait`` onto a queue of ``QUEUE_MAXSIZE`` and
drops a wake that finds it full, and drops a shadow wake (``dry_run`` true, every wake this
harness sends) once ``SHADOW_QUEUE_LIMIT`` are already queued. Its own benchmark calls
``send_wake`` 2,200 times with ``await asyncio.sleep(0)`` after each (issue 24: 253 of 2,200 lost
against this executor, none against the C++ port). The ``reference-*`` clients do exactly that,
through a sender task writing each frame and awaiting ``drain()`` and a separate task reading and
checking every ack in order, and report ``lost``: the wakes an executor that read too slowly
cost the poller. ``wake_send`` = ``sent_at_ns`` stamped before the enqueue -> that frame's
``drain()`` returned, for every wake that was not dropped.

These facts are the reference's; the code is this harness's own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

from bench.clients.frames import body_length, correlation_id, wake_message
from executor.wire.protocol import WakeMessage, decode_wake_ack, encode_frame

REFERENCE_KINDS: Final = ("reference-asyncio", "reference-uvloop")
"""The reference-policy burst clients, by event loop (the reference benchmark runs both)."""

QUEUE_MAXSIZE: Final = 1000
"""The reference poller's default queue bound (wakes)."""

SHADOW_QUEUE_LIMIT: Final = QUEUE_MAXSIZE // 4
"""Queued wakes past which the reference poller drops a shadow wake (its 0.25 of the bound)."""


def accepts(queue_depth: int, dry_run: bool) -> bool:
    """Whether the reference poller enqueues a wake that finds ``queue_depth`` wakes queued."""
    if dry_run and queue_depth >= SHADOW_QUEUE_LIMIT:
        return False
    return queue_depth < QUEUE_MAXSIZE


async def run_reference_burst(
    socket_path: str, frames: int, client: str
) -> tuple[list[int], dict[str, float]]:
    """Offer ``frames`` wakes back to back under the reference's drop policy.

    Returns each delivered wake's ``wake_send`` in ns and the figures ``lost`` (wakes dropped at
    the queue), ``deepest_queue`` and ``frames_per_s`` (delivered wakes / first enqueue -> last
    ack read).

    Raises:
        RuntimeError: an ack that is not the accepted ack of the next delivered wake.
    """
    reader, writer = await asyncio.open_unix_connection(socket_path)
    messages: asyncio.Queue[WakeMessage | None] = asyncio.Queue(maxsize=QUEUE_MAXSIZE)
    delivered: list[str] = []
    durations: list[int] = []
    acked = 0
    sending_done = False

    async def sender() -> None:
        while (message := await messages.get()) is not None:
            writer.write(encode_frame(message))
            await writer.drain()
            durations.append(time.perf_counter_ns() - message.sent_at_ns)

    async def ack_reader() -> None:
        nonlocal acked
        while not (sending_done and acked == len(delivered)):
            prefix = await reader.readexactly(4)
            ack = decode_wake_ack(await reader.readexactly(body_length(prefix)))
            expected = delivered[acked] if acked < len(delivered) else "(none sent)"
            if ack.status != "accepted" or ack.correlation_id != expected:
                raise RuntimeError(f"unexpected ack {ack!r}, expected {expected}")
            acked += 1

    send_task = asyncio.create_task(sender())
    read_task = asyncio.create_task(ack_reader())
    lost = deepest = 0
    started = time.perf_counter()
    try:
        for index in range(frames):
            message = wake_message(correlation_id(client, index), time.perf_counter_ns())
            if accepts(messages.qsize(), message.dry_run):
                delivered.append(message.correlation_id)
                messages.put_nowait(message)
                deepest = max(deepest, messages.qsize())
            else:
                lost += 1
            await asyncio.sleep(0)
        await messages.put(None)  # the end marker, not a wake: it may wait for room
        await send_task
        sending_done = True
        # One thread: either every ack is in now, or the reader returns after the last one.
        if acked < len(delivered):
            await read_task
    finally:
        send_task.cancel()
        read_task.cancel()
        writer.close()
    elapsed = time.perf_counter() - started
    return durations, {
        "lost": lost,
        "deepest_queue": deepest,
        "frames_per_s": len(delivered) / elapsed,
    }
