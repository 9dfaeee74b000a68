"""A small Trio client for the executor: connect, send wakes, read acks.

Used by the tests and the benchmark, and usable as a library from Trio code::

    async with connect("/tmp/trio-executor/executor.sock") as client:
        ack = await client.request(message)
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from executor.wire.protocol import (
    PREFIX_BYTES,
    WakeAck,
    WakeMessage,
    decode_wake_ack,
    encode_frame,
    parse_frame_length,
)


class ExecutorClient:
    """One connection to an executor. Acks arrive in the order their frames were sent.

    One task should send and one task receive at a time (Trio streams allow one of each).
    """

    def __init__(self, stream: trio.abc.HalfCloseableStream) -> None:
        self.stream = stream
        self._buffer = bytearray()

    async def send(self, message: WakeMessage) -> None:
        """Send one wake frame without waiting for its ack."""
        await self.stream.send_all(encode_frame(message))

    async def send_raw(self, data: bytes) -> None:
        """Send arbitrary bytes (a hand-made frame, or part of one)."""
        await self.stream.send_all(data)

    async def receive_ack(self) -> WakeAck:
        """Read the next ack.

        Raises:
            EOFError: the executor closed the connection before a whole ack arrived.
            executor.wire.protocol.DecodeError: the ack did not decode.
        """
        prefix = await self._receive_exactly(PREFIX_BYTES)
        return decode_wake_ack(await self._receive_exactly(parse_frame_length(prefix)))

    async def request(self, message: WakeMessage) -> WakeAck:
        """Send one wake and wait for its ack."""
        await self.send(message)
        return await self.receive_ack()

    async def aclose(self) -> None:
        """Close the connection."""
        await self.stream.aclose()

    async def _receive_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = await self.stream.receive_some()
            if not chunk:
                raise EOFError(
                    f"executor closed the connection ({len(self._buffer)} of {size} bytes read)"
                )
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data


@asynccontextmanager
async def connect(socket_path: str | os.PathLike[str]) -> AsyncIterator[ExecutorClient]:
    """Open a connection to the executor listening on ``socket_path``; close it on exit."""
    stream = await trio.open_unix_socket(os.fspath(socket_path))
    client = ExecutorClient(stream)
    try:
        yield client
    finally:
        await client.aclose()
