"""A/B of the stream's WebSocket client: trio-websocket (the product) vs wsproto over the order
path's TLS. ``python -m bench.experiments.stream_client``.

Experiment, not product (docs/performance/notebook/, 2026-12-02). Issue 22 asks for "a well-kept
Trio-native client: trio-websocket, or wsproto on the order path's TLS code; measure and say why".
One server process (``bench.experiments.stream_server``: TLS, the fake's certificate, the exchange's
``fill`` and ``user_order`` messages); in this process, per round and per variant:

- ``trio-websocket``: :func:`executor.exchange.stream.client.open_stream`, the product as it runs
  (TCP, ``trio.SSLStream``, trio-websocket's handshake, its reader task and message queue);
- ``wsproto``: :class:`WsprotoStdlibClient` below, wsproto driven by hand over a standard-library
  TLS socket in non-blocking mode, as ``executor.exchange.orders.connection`` uses TLS.

Both send the same handshake headers (the signature a constant: signing is the same in both and
is not what is compared) and parse each message with the product's ``parse_stream_message``.
Measured per variant and round: ``connect`` (TCP + TLS + WebSocket handshake, ``--connects``
times); ``burst`` (``--burst`` messages back to back) and ``paced`` (``--paced`` messages
``--gap-us`` apart, each arriving to an idle loop as the exchange's do): this process's CPU time per
message (``time.process_time``, to the last message parsed), and per message the latency from the
server's stamp just before its send to the client's just after the parse (``perf_counter_ns``:
one clock for both processes). Rounds interleaved, the variants' order alternating. Prints the
median over rounds of each round's p50/p90/p99 with the rounds' [min-max], and with ``--out`` keeps
every raw sample (``samples.csv``, ``cpu.csv``) and the printed summary (``summary.txt``).
"""

from __future__ import annotations

import argparse
import csv
import os
import select
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, Protocol
from urllib.parse import urlsplit

import orjson
import trio
from trio.lowlevel import notify_closing, wait_readable, wait_writable
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from bench.experiments.stream_server import stream_messages
from bench.reports.stats import percentile
from executor.exchange.orders.connection import open_tls_socket, receive_tls
from executor.exchange.stream.client import StreamEndpoint, handshake_headers, open_stream
from executor.exchange.stream.messages import STREAM_PATH, parse_stream_message
from executor.fake.credentials import FakeCredentials

VARIANTS: Final = ("trio-websocket", "wsproto")
SERVER_READY_TIMEOUT_S: Final = 30.0
"""How long the server process may take to print its port (imports, certificate)."""


class MessageSource(Protocol):
    """What a round asks of a connection: trio-websocket's two calls."""

    async def send_message(self, message: str) -> None: ...

    async def get_message(self) -> str | bytes: ...


class WsprotoStdlibClient:
    """wsproto over a non-blocking standard-library TLS socket; made by :meth:`open`."""

    def __init__(self, tls: ssl.SSLSocket) -> None:
        self._tls = tls
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._events: deque[Event] = deque()
        self._text: list[str] = []

    @classmethod
    async def open(cls, endpoint: StreamEndpoint) -> WsprotoStdlibClient:
        """TCP, the TLS handshake (verified), the signed WebSocket handshake."""
        parts = urlsplit(endpoint.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 443
        client = cls(await open_tls_socket(host, port, endpoint.context))
        target = Request(
            host=f"{host}:{port}", target=parts.path, extra_headers=handshake_headers(endpoint)
        )
        await client._send(client._ws.send(target))
        event = await client._next_event()
        if isinstance(event, RejectConnection) or not isinstance(event, AcceptConnection):
            client.close()
            raise ConnectionError(f"handshake refused: {event!r}")
        return client

    async def send_message(self, message: str) -> None:
        """One text message."""
        await self._send(self._ws.send(TextMessage(data=message)))

    async def get_message(self) -> str:
        """The next whole text message (Pings answered on the way)."""
        while True:
            event = await self._next_event()
            if isinstance(event, TextMessage):
                self._text.append(event.data)
                if event.message_finished:
                    text, self._text = "".join(self._text), []
                    return text
            elif isinstance(event, Ping):
                await self._send(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                raise ConnectionError(f"closed by the server: {event.code}")

    def close(self) -> None:
        """Close now, without a goodbye (the server does not wait for one)."""
        notify_closing(self._tls)
        self._tls.close()

    async def _next_event(self) -> Event:
        while not self._events:
            self._events.extend(self._ws.events())
            if self._events:
                break
            data = await self._receive()
            if not data:
                raise ConnectionError("the server closed the connection")
            self._ws.receive_data(data)
        return self._events.popleft()

    async def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self._tls.send(view) :]
            except ssl.SSLWantWriteError:
                await wait_writable(self._tls)
            except ssl.SSLWantReadError:
                await wait_readable(self._tls)

    async def _receive(self) -> bytes:
        return await receive_tls(self._tls)  # the order connection's read, as it is


@asynccontextmanager
async def connected(variant: str, endpoint: StreamEndpoint) -> AsyncIterator[MessageSource]:
    """One connection of ``variant``, closed on exit."""
    if variant == "trio-websocket":
        async with open_stream(endpoint) as ws:
            yield ws
        return
    client = await WsprotoStdlibClient.open(endpoint)
    try:
        yield client
    finally:
        client.close()


async def _messages(source: MessageSource, count: int, gap_us: int) -> tuple[list[float], float]:
    """Ask for ``count`` messages ``gap_us`` apart; each one's latency (µs, send -> parsed) and
    this process's CPU µs per message."""
    await source.send_message(
        orjson.dumps({"cmd": "send", "count": count, "gap_us": gap_us}).decode()
    )
    received_ns: list[int] = []
    cpu_start = time.process_time()
    for _ in range(count):
        parse_stream_message(await source.get_message())
        received_ns.append(time.perf_counter_ns())
    cpu_us = (time.process_time() - cpu_start) / max(count, 1) * 1e6
    done = orjson.loads(await source.get_message())
    if done.get("type") != "bench_done" or len(done["sent_ns"]) != count:
        raise RuntimeError(f"the server's report does not match: {str(done)[:200]}")
    latencies = [(r - s) / 1000 for r, s in zip(received_ns, done["sent_ns"], strict=True)]
    return latencies, cpu_us


Samples = dict[str, list[float]]
"""``connect``, ``burst``, ``paced`` latencies (µs) and ``cpu burst``, ``cpu paced`` (µs/msg)."""


async def _round(variant: str, endpoint: StreamEndpoint, args: argparse.Namespace) -> Samples:
    samples: Samples = {"connect": []}
    for _ in range(args.connects):
        started = time.perf_counter_ns()
        async with connected(variant, endpoint):
            samples["connect"].append((time.perf_counter_ns() - started) / 1000)
    async with connected(variant, endpoint) as source:
        await _messages(source, args.warmup, 0)
        samples["burst"], burst_cpu = await _messages(source, args.burst, 0)
        samples["paced"], paced_cpu = await _messages(source, args.paced, args.gap_us)
    samples["cpu burst"], samples["cpu paced"] = [burst_cpu], [paced_cpu]
    return samples


async def _run(
    port: int, ca_file: Path, args: argparse.Namespace
) -> list[tuple[int, str, Samples]]:
    context = ssl.create_default_context(cafile=str(ca_file))
    endpoint = StreamEndpoint(
        f"wss://127.0.0.1:{port}{STREAM_PATH}", "bench-key", lambda *_: "unsigned", context
    )
    results = []
    for number in range(args.rounds):
        order = VARIANTS if number % 2 == 0 else tuple(reversed(VARIANTS))
        for variant in order:
            samples = await _round(variant, endpoint, args)
            results.append((number + 1, variant, samples))
            print(
                f"round {number + 1} {variant:>14}: connect p50"
                f" {percentile(samples['connect'], 0.5):7.1f} us  paced p50"
                f" {percentile(samples['paced'], 0.5):6.1f} us  cpu/msg burst"
                f" {samples['cpu burst'][0]:5.1f} paced {samples['cpu paced'][0]:5.1f} us",
                flush=True,
            )
    return results


def summary_lines(results: Sequence[tuple[int, str, Samples]]) -> list[str]:
    """Per variant and measure: the median over rounds of each round's p50/p90/p99 (CPU: the
    rounds' values), with the rounds' [min-max]."""
    lines = ["median over rounds [min-max over rounds], us"]
    for measure in ("connect", "burst", "paced"):
        for variant in VARIANTS:
            per_round = [s[measure] for _, v, s in results if v == variant]
            cells = []
            for name, rank in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                values = [percentile(samples, rank) for samples in per_round]
                cells.append(
                    f"{name} {statistics.median(values):8.1f} [{min(values):.1f}-{max(values):.1f}]"
                )
            lines.append(f"  {measure:>7} {variant:>14}: " + "  ".join(cells))
    for measure in ("cpu burst", "cpu paced"):
        for variant in VARIANTS:
            values = [s[measure][0] for _, v, s in results if v == variant]
            lines.append(
                f"  {measure:>9} {variant:>14}: {statistics.median(values):6.1f} us/message"
                f" [{min(values):.1f}-{max(values):.1f}]"
            )
    return lines


def write_samples(out: Path, results: Sequence[tuple[int, str, Samples]], text: str) -> None:
    """Every raw sample, and the summary, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "samples.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["round", "variant", "measure", "index", "us"])
        for number, variant, samples in results:
            for measure in ("connect", "burst", "paced"):
                for index, value in enumerate(samples[measure]):
                    writer.writerow([number, variant, measure, index, f"{value:.3f}"])
    with (out / "cpu.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["round", "variant", "mode", "cpu_us_per_message"])
        for number, variant, samples in results:
            for mode in ("burst", "paced"):
                writer.writerow([number, variant, mode, f"{samples['cpu ' + mode][0]:.3f}"])
    (out / "summary.txt").write_text(text, encoding="utf-8")


def _start_server(cert: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The server process and its port."""
    command = [sys.executable, "-m", "bench.experiments.stream_server", "--cert", str(cert)]
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], SERVER_READY_TIMEOUT_S)
    line = server.stdout.readline() if ready else b""
    try:
        return server, int(orjson.loads(line)["port"])
    except (ValueError, KeyError, TypeError):
        _stop(server)
        raise RuntimeError(f"the stream server did not start: {line[:200]!r}") from None


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if server.stdout is not None:
        server.stdout.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B; print per round and the summary (and keep the samples with ``--out``)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.stream_client",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--connects", type=int, default=30, help="connections timed per round")
    parser.add_argument("--warmup", type=int, default=200, help="messages read, not kept")
    parser.add_argument("--burst", type=int, default=2000, help="messages back to back")
    parser.add_argument("--paced", type=int, default=1000, help="messages --gap-us apart")
    parser.add_argument("--gap-us", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="folder for the raw samples")
    args = parser.parse_args(argv)
    fill, update = stream_messages()
    header = [
        f"python -m bench.experiments.stream_client {' '.join(argv or sys.argv[1:])}".rstrip(),
        f"messages: fill {len(fill)} B, user_order {len(update)} B, alternating;"
        f" load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    print("\n".join(header), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as directory:
        credentials = FakeCredentials.generate(Path(directory))
        assert credentials.server_pem is not None
        server, port = _start_server(credentials.server_pem)
        try:
            results = trio.run(_run, port, credentials.ca_file, args)
        finally:
            _stop(server)
    lines = [
        *summary_lines(results),
        f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    print("\n".join(lines))
    if args.out is not None:
        write_samples(args.out, results, "\n".join([*header, *lines]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
