"""Benchmark clients, each run as its own process: ``python -m bench.clients.latency KIND ...``.

Latency kinds send ``--frames`` frames paced one at a time and write one duration in nanoseconds
per line to ``--out`` (warm-up included; the harness drops it):

- ``blocking``: plain socket; ``roundtrip`` = just before the write -> whole ack read.
- ``asyncio``: the reference poller's shape (bounded ``asyncio.Queue``, a sender task that writes
  and awaits ``drain()``, a separate ack reader); ``wake_send`` = ``sent_at_ns`` stamped before
  enqueue -> ``drain()`` returned. The producer enqueues the next message only after the ack
  reader has seen the previous ack, so the span never measures queue depth.
- ``trio``: the same poller shape on Trio (memory channel, ``send_all``, separate ack reader).

Burst kinds (``burst-asyncio``, ``burst-uvloop``) have the poller's shape but never wait for an
ack: the producer enqueues ``--frames`` wakes back to back with only ``asyncio.sleep(0)`` between
them, as the reference's burst harness does; ``wake_send`` = ``sent_at_ns`` stamped before the
enqueue -> that frame's ``drain()`` returned. They also print a JSON line with the deepest the queue
got and the burst's frames/s (first enqueue -> last ack read).

Reference kinds (``reference-asyncio``, ``reference-uvloop``) are the burst with the reference
poller's queue bound and drop policy (``bench.clients.reference_burst``): they never block, and
print ``lost`` (wakes dropped at the queue) with the burst's figures.

``flood`` is the throughput client: pipelined frames (no waiting for acks) for ``--seconds``, at
``--rate`` frames/s (0 = as fast as possible); it prints a JSON line with sent/acked counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import time
from typing import Final

import trio

from bench.clients.frames import body_length, correlation_id, wake_frame, wake_message
from bench.clients.reference_burst import REFERENCE_KINDS, run_reference_burst
from executor.wire.protocol import WakeMessage, decode_wake_ack, encode_frame

POLLER_QUEUE: Final = 64
"""The poller's message queue bound (messages); a guess at the reference's order of magnitude."""

BURST_KINDS: Final = ("burst-asyncio", "burst-uvloop")
"""The burst clients, by event loop (the default asyncio loop and uvloop)."""


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    chunks: list[bytes] = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            raise ConnectionError("executor closed the connection mid-ack")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _check_ack(body: bytes, expected_id: str) -> None:
    ack = decode_wake_ack(body)
    if ack.status != "accepted" or ack.correlation_id != expected_id:
        raise RuntimeError(f"unexpected ack {ack!r} for {expected_id}")


def run_blocking(socket_path: str, frames: int) -> list[int]:
    """Write one frame, read its whole ack, repeat; return each roundtrip in ns."""
    durations: list[int] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(socket_path)
        for index in range(frames):
            cid = correlation_id("blocking", index)
            frame = wake_frame(cid, time.perf_counter_ns())
            started = time.perf_counter_ns()
            sock.sendall(frame)
            body = _recv_exactly(sock, body_length(_recv_exactly(sock, 4)))
            durations.append(time.perf_counter_ns() - started)
            _check_ack(body, cid)
    return durations


async def run_asyncio_poller(socket_path: str, frames: int) -> list[int]:
    """The reference poller's shape, paced by acks; return each ``wake_send`` in ns."""
    reader, writer = await asyncio.open_unix_connection(socket_path)
    messages: asyncio.Queue[tuple[str, int]] = asyncio.Queue(maxsize=POLLER_QUEUE)
    acks: asyncio.Queue[bytes] = asyncio.Queue()
    durations: list[int] = []

    async def sender() -> None:
        for _ in range(frames):
            cid, sent_at_ns = await messages.get()
            writer.write(encode_frame(wake_message(cid, sent_at_ns)))
            await writer.drain()
            durations.append(time.perf_counter_ns() - sent_at_ns)

    async def ack_reader() -> None:
        for _ in range(frames):
            prefix = await reader.readexactly(4)
            await acks.put(await reader.readexactly(body_length(prefix)))

    send_task = asyncio.create_task(sender())
    read_task = asyncio.create_task(ack_reader())
    try:
        for index in range(frames):
            cid = correlation_id("asyncio", index)
            await messages.put((cid, time.perf_counter_ns()))
            _check_ack(await acks.get(), cid)
        await asyncio.gather(send_task, read_task)
    finally:
        send_task.cancel()
        read_task.cancel()
        writer.close()
    return durations


async def run_trio_poller(socket_path: str, frames: int) -> list[int]:
    """The poller shape on Trio, paced by acks; return each ``wake_send`` in ns."""
    stream = await trio.open_unix_socket(socket_path)
    message_tx, message_rx = trio.open_memory_channel[tuple[str, int]](POLLER_QUEUE)
    ack_tx, ack_rx = trio.open_memory_channel[bytes](frames)
    durations: list[int] = []

    async def sender() -> None:
        async with message_rx:
            async for cid, sent_at_ns in message_rx:
                await stream.send_all(encode_frame(wake_message(cid, sent_at_ns)))
                durations.append(time.perf_counter_ns() - sent_at_ns)

    async def ack_reader() -> None:
        buffer = bytearray()
        async with ack_tx:
            for _ in range(frames):
                while len(buffer) < 4 or len(buffer) < 4 + body_length(bytes(buffer[:4])):
                    chunk = await stream.receive_some()
                    if not chunk:
                        raise ConnectionError("executor closed the connection mid-ack")
                    buffer += chunk
                end = 4 + body_length(bytes(buffer[:4]))
                await ack_tx.send(bytes(buffer[4:end]))
                del buffer[:end]

    async with stream, trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        nursery.start_soon(ack_reader)
        async with message_tx:
            for index in range(frames):
                cid = correlation_id("trio", index)
                await message_tx.send((cid, time.perf_counter_ns()))
                _check_ack(await ack_rx.receive(), cid)
    return durations


async def run_burst_poller(
    socket_path: str, frames: int, client: str
) -> tuple[list[int], dict[str, float]]:
    """Enqueue ``frames`` wakes back to back; each ``wake_send`` in ns and the burst's figures.

    Every ack is read and checked in order by a separate task, so a lost or reordered ack fails
    the burst rather than shortening it.
    """
    reader, writer = await asyncio.open_unix_connection(socket_path)
    messages: asyncio.Queue[WakeMessage] = asyncio.Queue(maxsize=POLLER_QUEUE)
    durations: list[int] = []

    async def sender() -> None:
        for _ in range(frames):
            message = await messages.get()
            writer.write(encode_frame(message))
            await writer.drain()
            durations.append(time.perf_counter_ns() - message.sent_at_ns)

    async def ack_reader() -> None:
        for index in range(frames):
            prefix = await reader.readexactly(4)
            _check_ack(await reader.readexactly(body_length(prefix)), correlation_id(client, index))

    send_task = asyncio.create_task(sender())
    read_task = asyncio.create_task(ack_reader())
    deepest = 0
    started = time.perf_counter()
    try:
        for index in range(frames):
            message = wake_message(correlation_id(client, index), time.perf_counter_ns())
            await messages.put(message)
            deepest = max(deepest, messages.qsize())
            await asyncio.sleep(0)
        await asyncio.gather(send_task, read_task)
    finally:
        send_task.cancel()
        read_task.cancel()
        writer.close()
    elapsed = time.perf_counter() - started
    return durations, {"deepest_queue": deepest, "frames_per_s": frames / elapsed}


class FloodFrames:
    """Frames with ids unique to this client, made by writing the index into one encoded frame.

    Encoding a wake costs the client ~10 µs; a flood of 60k frames/s would spend most of a CPU
    on it, on the same two CPUs as the executor. Every frame is the template's bytes with its
    fixed-width index written in (same length, so the prefix holds).
    """

    WIDTH: Final = 9

    def __init__(self, tag: str) -> None:
        marker = f"bench-{tag}-".encode()
        template = wake_frame(marker.decode() + "0" * self.WIDTH, time.perf_counter_ns())
        at = template.index(marker) + len(marker)
        self._head = template[:at]
        self._tail = template[at + self.WIDTH :]

    def frame(self, index: int) -> bytes:
        """The frame of the ``index``-th wake (correlation id ``bench-TAG-<index>``)."""
        return b"%b%09d%b" % (self._head, index, self._tail)


def run_flood(socket_path: str, seconds: float, rate: float, batch: int = 1) -> dict[str, float]:
    """Pipeline frames for ``seconds`` at ``rate`` frames/s (0: flat out); count sent and acked.

    ``batch`` frames go out per ``sendall`` (the saturation scenario writes 64 at a time).
    """
    acked = 0
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)

    def count_acks() -> None:
        nonlocal acked
        with sock.makefile("rb") as stream:
            while prefix := stream.read(4):
                stream.read(body_length(prefix))
                acked += 1

    reader = threading.Thread(target=count_acks, daemon=True)
    reader.start()
    frames = FloodFrames(f"flood{os.getpid()}")
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds
    while (now := time.perf_counter()) < deadline:
        if rate > 0 and sent >= rate * (now - started):
            time.sleep(min(batch / rate, deadline - now))
            continue
        sock.sendall(b"".join(frames.frame(sent + i) for i in range(batch)))
        sent += batch
    elapsed = time.perf_counter() - started
    sock.shutdown(socket.SHUT_WR)
    reader.join(timeout=30.0)
    sock.close()
    return {"sent": sent, "acked": acked, "elapsed_s": elapsed}


def main(argv: list[str] | None = None) -> int:
    """Run one client kind and write its durations (or counts) where asked."""
    parser = argparse.ArgumentParser(prog="python -m bench.clients.latency", description=__doc__)
    parser.add_argument(
        "kind", choices=("blocking", "asyncio", "trio", "flood", *BURST_KINDS, *REFERENCE_KINDS)
    )
    parser.add_argument("--socket", required=True, help="executor's Unix socket")
    parser.add_argument("--frames", type=int, default=0, help="frames to send (latency kinds)")
    parser.add_argument("--out", help="file for one duration in ns per line (latency kinds)")
    parser.add_argument("--seconds", type=float, default=2.0, help="flood: sending window")
    parser.add_argument("--rate", type=float, default=0.0, help="flood: frames/s, 0 = flat out")
    parser.add_argument("--batch", type=int, default=1, help="flood: frames per write (1)")
    args = parser.parse_args(argv)
    if args.kind == "flood":
        print(json.dumps(run_flood(args.socket, args.seconds, args.rate, max(1, args.batch))))
        return 0
    if args.kind in (*BURST_KINDS, *REFERENCE_KINDS):
        if args.kind in REFERENCE_KINDS:
            burst = run_reference_burst(args.socket, args.frames, args.kind)
        else:
            burst = run_burst_poller(args.socket, args.frames, args.kind)
        if args.kind.endswith("-uvloop"):
            import uvloop

            durations, figures = uvloop.run(burst)
        else:
            durations, figures = asyncio.run(burst)
        print(json.dumps(figures))
    elif args.kind == "blocking":
        durations = run_blocking(args.socket, args.frames)
    elif args.kind == "asyncio":
        durations = asyncio.run(run_asyncio_poller(args.socket, args.frames))
    else:
        durations = trio.run(run_trio_poller, args.socket, args.frames)
    with open(args.out, "w", encoding="ascii") as out:
        out.writelines(f"{duration}\n" for duration in durations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
