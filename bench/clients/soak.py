"""The soak's clients: pipelined load with every ack recorded, fuzzed frames, vanishing peers.

Plain threads and blocking sockets, so the executor under test is the only Trio program in the
picture. :class:`PipelinedClient` pipelines valid frames on one connection while a reader thread
records each ack; :func:`fuzz_round` sends mutated frames that must each get exactly one ack;
:func:`vanishing_peer` connects, does one rude thing and closes without reading.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import socket
import threading
import time
from pathlib import Path
from typing import Final

import orjson

from bench.clients.frames import wake_message
from executor.wire.protocol import PREFIX_BYTES, decode_wake_ack, encode_frame

CLIENT_TIMEOUT_S: Final = 30.0
"""A client socket operation blocked this long means the executor hung (s)."""

FRAMES_PER_SEND: Final = 32
"""Frames a load client writes per ``sendall`` (frames): pipelining without a huge buffer."""

TEMPLATE: Final = wake_message("template", sent_at_ns=412737100845213)
"""The soak's valid wake: the benchmark's message shape (a full v4 shadow fire)."""


def wake_frame(correlation_id: str) -> bytes:
    """One valid shadow-fire frame (prefix included) carrying ``correlation_id``."""
    return encode_frame(dataclasses.replace(TEMPLATE, correlation_id=correlation_id))


def connect_client(socket_path: Path) -> socket.socket:
    """A blocking Unix-socket connection to the executor, with ``CLIENT_TIMEOUT_S`` on each call."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CLIENT_TIMEOUT_S)
    sock.connect(str(socket_path))
    return sock


def _receive_exactly(sock: socket.socket, buffer: bytearray, size: int) -> bytes | None:
    """``size`` bytes from ``buffer`` topped up from ``sock``; None on EOF or reset."""
    while len(buffer) < size:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buffer += chunk
    data = bytes(buffer[:size])
    del buffer[:size]
    return data


def read_ack_id(sock: socket.socket, buffer: bytearray) -> tuple[str, str] | None:
    """The next ack's ``(status, correlation_id)``; None when the executor closed the connection."""
    prefix = _receive_exactly(sock, buffer, PREFIX_BYTES)
    if prefix is None:
        return None
    body = _receive_exactly(sock, buffer, int.from_bytes(prefix, "big"))
    if body is None:
        return None
    ack = decode_wake_ack(body)
    return ack.status, ack.correlation_id


class PipelinedClient:
    """One connection: a sender thread pipelining frames, a reader thread recording acks.

    Ids are ``{prefix}{n:08d}``, sent in order. The sender stops on :meth:`stop_sending` or when
    the executor goes away; the reader stops at EOF (or a reset), i.e. when the executor closes.
    """

    def __init__(
        self,
        socket_path: Path,
        prefix: str,
        *,
        max_frames: int | None = None,
        frames_per_s: float | None = None,
    ) -> None:
        self.prefix = prefix
        self.max_frames = max_frames
        self.frames_per_s = frames_per_s
        self.sock = connect_client(socket_path)
        self.frames_sent = 0
        self.acked_ids: list[str] = []
        self.rejected = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, daemon=True)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)

    def start(self) -> PipelinedClient:
        self._sender.start()
        self._reader.start()
        return self

    def stop_sending(self) -> None:
        self._stop.set()

    def close_after_acks(self, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        """Stop sending, wait until every sent frame is acked, then close (a clean disconnect)."""
        self.stop_sending()
        self._sender.join(timeout_s)
        deadline = time.monotonic() + timeout_s
        while len(self.acked_ids) + self.rejected < self.frames_sent and self._reader.is_alive():
            if time.monotonic() > deadline:
                self.error = f"{self.frames_sent - len(self.acked_ids)} acks never arrived"
                break
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.join(timeout_s)

    def join(self, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        """Wait for both threads (the reader ends when the executor closes), then close."""
        self._sender.join(timeout_s)
        self._reader.join(timeout_s)
        if self._reader.is_alive() and self.error is None:
            self.error = "ack reader still blocked"
        self.sock.close()

    def _send_loop(self) -> None:
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                if self.frames_per_s is not None:
                    # Paced: sleep until this chunk is due (load the writer can keep up with).
                    due = started + self.frames_sent / self.frames_per_s
                    time.sleep(max(0.0, due - time.monotonic()))
                if self.max_frames is not None and self.frames_sent >= self.max_frames:
                    return
                start = self.frames_sent
                count = FRAMES_PER_SEND
                if self.max_frames is not None:
                    count = min(count, self.max_frames - start)
                chunk = b"".join(
                    wake_frame(f"{self.prefix}{n:08d}") for n in range(start, start + count)
                )
                self.sock.sendall(chunk)
                self.frames_sent += count
        except (BrokenPipeError, ConnectionResetError):
            pass  # the executor closed the connection: shutdown or crash
        except OSError as error:
            self.error = f"send failed: {error!r}"

    def _read_loop(self) -> None:
        buffer = bytearray()
        try:
            while True:
                ack = read_ack_id(self.sock, buffer)
                if ack is None:
                    return
                status, correlation_id = ack
                if status == "accepted":
                    self.acked_ids.append(correlation_id)
                else:
                    self.rejected += 1
        except OSError as error:
            if not self._stop.is_set() or not isinstance(error, socket.timeout):
                self.error = f"read failed: {error!r}"


def mutated_body(rng: random.Random) -> bytes:
    """A body made by one random mutation of a valid wake (bytes, JSON values, or structure)."""
    valid = orjson.loads(orjson.dumps(dataclasses.replace(TEMPLATE, correlation_id="fz")))
    raw = orjson.dumps(valid)
    choice = rng.randrange(8)
    if choice == 0:  # flip a few bytes
        data = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if choice == 1:  # truncate
        return raw[: rng.randrange(len(raw))]
    if choice == 2:  # random bytes
        return rng.randbytes(rng.randrange(0, 512))
    if choice == 3:  # drop a field
        del valid[rng.choice(sorted(valid))]
    elif choice == 4:  # a field of the wrong type
        valid[rng.choice(sorted(valid))] = rng.choice([None, "x", -1, 1.5e308, [], {}, True])
    elif choice == 5:  # an unknown field
        valid[f"extra{rng.randrange(100)}"] = rng.randrange(1000)
    elif choice == 6:  # a long or odd correlation id
        valid["correlation_id"] = rng.choice(["", "é" * rng.randrange(200), "x" * 129, "\u2028"])
    else:  # a schema version or price out of range
        valid[rng.choice(["schema_version", "wire_price_yes_dollars"])] = rng.choice(
            [0, 5, -1, 2.0, float("1e10")]
        )
    return orjson.dumps(valid)


@dataclasses.dataclass
class FuzzResult:
    frames: int = 0
    accepted: int = 0
    rejected: int = 0
    failure: str | None = None


def fuzz_round(socket_path: Path, rng: random.Random, frames: int) -> FuzzResult:
    """Send ``frames`` mutated frames on one connection; each must be answered by exactly one ack.

    A valid sentinel frame closes the round: its ack must be the very next one, which proves no
    fuzzed frame was answered twice or left the connection out of step.
    """
    result = FuzzResult()
    buffer = bytearray()
    with contextlib.closing(connect_client(socket_path)) as sock:
        for _ in range(frames):
            body = mutated_body(rng)
            sock.sendall(len(body).to_bytes(PREFIX_BYTES, "big") + body)
            result.frames += 1
            ack = read_ack_id(sock, buffer)
            if ack is None:
                result.failure = f"executor closed the connection on fuzz body {body[:80]!r}"
                return result
            if ack[0] == "accepted":
                result.accepted += 1
            else:
                result.rejected += 1
        sentinel = f"fuzz-sentinel-{rng.randrange(1 << 30)}"
        sock.sendall(wake_frame(sentinel))
        ack = read_ack_id(sock, buffer)
        if ack == ("accepted", sentinel):
            result.accepted += 1
        else:
            result.failure = f"sentinel answered by {ack!r}: a fuzz frame got more than one ack"
    return result


def vanishing_peer(socket_path: Path, rng: random.Random, prefix: str) -> str:
    """Connect, do one rude thing, close without reading; return what it did."""
    frame = wake_frame(f"{prefix}{rng.randrange(1 << 30)}")
    with contextlib.closing(connect_client(socket_path)) as sock:
        kind = rng.choice(["nothing", "half prefix", "half body", "frames", "frames unread"])
        if kind == "half prefix":
            sock.sendall(frame[:2])
        elif kind == "half body":
            sock.sendall(frame[: rng.randrange(PREFIX_BYTES + 1, len(frame))])
        elif kind == "frames":
            sock.sendall(frame * rng.randint(1, 20))
        elif kind == "frames unread":
            sock.sendall(frame * 200)
    return kind


__all__ = [
    "CLIENT_TIMEOUT_S",
    "FuzzResult",
    "PipelinedClient",
    "connect_client",
    "fuzz_round",
    "mutated_body",
    "read_ack_id",
    "vanishing_peer",
    "wake_frame",
]
