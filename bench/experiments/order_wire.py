"""A/B of the order connection's TLS stream: the stdlib non-blocking socket vs ``trio.SSLStream``.

Experiment, not product (docs/performance/notebook/, 2026-12-01). One fake exchange process
(``python -m executor.fake``); in this process, per round and per variant, one connection opened
and handshaken, ``--warmup`` orders discarded and ``--orders`` kept, rounds interleaved and the
variant order rotated. Both variants send the same template bytes and parse with h11; only the
stream differs:

- ``stdlib``: :class:`executor.exchange.orders.connection.OrderConnection` (the product);
- ``trio``: the same exchange over ``trio.SSLStream`` (``send_all``, ``receive_some``).

Per order: ``wire`` = before the write call -> the write returned (what the product stamps as
``wire``); ``round`` = the write returned -> the whole response parsed; ``cpu`` = this process's
CPU time per order (``time.process_time``) over the kept orders. The signature is made once per
round, outside every timed span (the fake verifies it on every request and does not refuse a
reuse within its freshness window). Prints p50/p99 per variant, the median over rounds, and the
ratio stdlib / trio.

    python -m bench.experiments.order_wire [--rounds 7] [--orders 1000] [--warmup 200]
"""

from __future__ import annotations

import argparse
import ssl
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Final
from urllib.parse import urlsplit

import h11
import trio

from bench.harness.fake_process import FakeExchangeProcess
from bench.reports.stats import percentile
from executor.clock import wall_ms
from executor.exchange.messages import ORDER_PATH, OrderSpec, OrderStamps, order_body
from executor.exchange.orders.connection import READ_BYTES, OrderConnection
from executor.exchange.orders.template import OrderTemplate
from executor.signer import KalshiSigner

VARIANTS: Final = ("stdlib", "trio")


class TrioStreamConnection:
    """The order exchange over ``trio.SSLStream``: the other side of the A/B."""

    def __init__(self, stream: trio.SSLStream[trio.SocketStream], template: OrderTemplate) -> None:
        self._stream = stream
        self._h11 = h11.Connection(h11.CLIENT)
        self.template = template

    @classmethod
    async def open(
        cls, host: str, port: int, context: ssl.SSLContext, template: OrderTemplate
    ) -> TrioStreamConnection:
        """Connect and handshake."""
        stream = trio.SSLStream(
            await trio.open_tcp_stream(host, port), context, server_hostname=host
        )
        await stream.do_handshake()
        return cls(stream, template)

    async def exchange(self, request: bytes, body: bytes, stamps: OrderStamps) -> int:
        """Write, stamp ``wire_ns``, read the whole response; its status."""
        await self._stream.send_all(request)
        stamps.wire_ns = time.perf_counter_ns()
        for sent in self.template.h11_events(body):
            self._h11.send(sent)
        status = 0
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                self._h11.receive_data(bytes(await self._stream.receive_some(READ_BYTES)))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage):
                self._h11.start_next_cycle()
                return status

    async def aclose(self) -> None:
        """Close the stream."""
        await trio.aclose_forcefully(self._stream)


async def _round(
    variant: str,
    base_url: str,
    context: ssl.SSLContext,
    template: OrderTemplate,
    signer: KalshiSigner,
    orders: int,
    warmup: int,
) -> tuple[list[float], list[float], float]:
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    connection: OrderConnection | TrioStreamConnection
    if variant == "stdlib":
        connection = await OrderConnection.open(host, port, context, template, 1)
    else:
        connection = await TrioStreamConnection.open(host, port, context, template)
    timestamp = str(wall_ms())
    signature = signer.sign(timestamp, "POST", ORDER_PATH)
    wire, round_trip = [], []
    cpu_start = 0.0
    for number in range(warmup + orders):
        if number == warmup:
            cpu_start = time.process_time()
        # A fresh id per order (32 hex, as the executor mints): every round and variant sends to
        # the same fake, which answers a client_order_id used before with 409.
        spec = OrderSpec(
            "KXTEST", uuid.uuid4().hex, "bid", 1, "0.4200", "fill_or_kill", "taker_at_cross", 0
        )
        body = order_body(spec)
        request = template.request(timestamp, signature, body)
        stamps = OrderStamps()
        before = time.perf_counter_ns()
        result = await connection.exchange(request, body, stamps)
        done = time.perf_counter_ns()
        status = result[0] if isinstance(result, tuple) else result
        if status != 201:
            raise RuntimeError(f"{variant}: the fake answered {status}")
        assert stamps.wire_ns is not None
        if number >= warmup:
            wire.append((stamps.wire_ns - before) / 1000)
            round_trip.append((done - stamps.wire_ns) / 1000)
    cpu_us = (time.process_time() - cpu_start) / orders * 1e6
    if isinstance(connection, OrderConnection):
        connection.close()
    else:
        await connection.aclose()
    return wire, round_trip, cpu_us


async def _main(rounds: int, orders: int, warmup: int) -> None:
    with FakeExchangeProcess() as fake:
        info = fake.info
        context = ssl.create_default_context(cafile=info.ca_file)
        template = OrderTemplate(urlsplit(info.base_url).netloc, info.key_id)
        signer = KalshiSigner(info.private_key_path, info.key_id)
        results: dict[str, list[tuple[float, float, float, float, float]]] = {
            v: [] for v in VARIANTS
        }
        for number in range(rounds):
            order = VARIANTS if number % 2 == 0 else tuple(reversed(VARIANTS))
            for variant in order:
                wire, round_trip, cpu = await _round(
                    variant, info.base_url, context, template, signer, orders, warmup
                )
                row = (
                    percentile(wire, 0.5),
                    percentile(wire, 0.99),
                    percentile(round_trip, 0.5),
                    percentile(round_trip, 0.99),
                    cpu,
                )
                results[variant].append(row)
                print(
                    f"round {number + 1} {variant:>6}: wire p50 {row[0]:7.1f} p99 {row[1]:7.1f}"
                    f"  round p50 {row[2]:7.1f} p99 {row[3]:7.1f}  cpu {row[4]:6.1f} us",
                    flush=True,
                )
    names = ("wire p50", "wire p99", "round p50", "round p99", "cpu/order")
    medians = {v: [statistics.median(r[i] for r in results[v]) for i in range(5)] for v in VARIANTS}
    print(f"median of {rounds} rounds ({orders} orders after {warmup} warm-up), us:")
    for index, name in enumerate(names):
        stdlib, stream = medians["stdlib"][index], medians["trio"][index]
        spread = [
            min(r[index] for r in results["stdlib"]),
            max(r[index] for r in results["stdlib"]),
        ]
        print(
            f"  {name:>10}: stdlib {stdlib:7.1f} [{spread[0]:.1f}-{spread[1]:.1f}]"
            f"  trio.SSLStream {stream:7.1f}  ratio {stdlib / stream:.2f}x"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B; print per round and the medians."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.order_wire", description=__doc__
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    trio.run(_main, args.rounds, args.orders, args.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
