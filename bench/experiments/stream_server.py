"""A minimal TLS WebSocket server sending the exchange's stream messages on request, in its own
process: the other end of ``bench.experiments.stream_client``.

Experiment, not product. ``python -m bench.experiments.stream_server --cert SERVER.pem`` listens on
127.0.0.1 (TLS with the fake exchange's certificate, wsproto over ``trio.SSLStream``, the fake's
own stack) and prints one JSON line, ``{"port": N}``, once it listens; SIGTERM ends it. It
accepts any handshake (the signed headers are not checked: a signature is not what is measured)
and then answers one command at a time on each connection:

    {"cmd": "send", "count": N, "gap_us": G}

by sending ``N`` messages, alternately a ``fill`` and a ``user_order`` of one order (built by the
fake's own ``executor.fake.stream_messages``, so their sizes and fields are the exchange's), ``G``
µs apart (0: back to back), and then one ``{"type": "bench_done", "sent_ns": [...]}`` message
with the ``time.perf_counter_ns()`` read just before each message's bytes were handed to TLS.
``perf_counter_ns`` is ``CLOCK_MONOTONIC`` on Linux, one clock for every process on the host, so
the client subtracts it from its own stamps.
"""

from __future__ import annotations

import argparse
import json
import signal
import ssl
import sys
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

import orjson
import trio
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)

from executor.fake.book.orders import BookOrder
from executor.fake.stream_messages import fill_message, user_order_message

RECEIVE_BYTES: Final = 64 * 1024
"""Read size per ``receive_some``: commands are a few dozen bytes."""
MAX_COUNT: Final = 1_000_000
"""Most messages one command may ask for (a guard against a typo, far above any run)."""


def sample_order() -> BookOrder:
    """A resting two-contract order one contract into its fill: what a maker fill reports."""
    now_ms = time.time_ns() // 1_000_000
    return BookOrder(
        order_id="ee587a1c-8b87-4dcf-b721-9f6f790619fa",
        client_order_id="c" * 32,
        ticker="KXBTCD-26AUG2917-T112750",
        book_side="bid",
        yes_price=Decimal("0.56"),
        initial=Decimal(2),
        filled=Decimal(1),
        status="resting",
        taker_cost=Decimal(0),
        maker_cost=Decimal("0.56"),
        taker_fees=Decimal(0),
        maker_fees=Decimal(0),
        created_ms=now_ms - 1000,
        updated_ms=now_ms,
        self_trade_prevention_type="taker_at_cross",
        exchange_index=0,
    )


def stream_messages() -> tuple[str, str]:
    """One ``fill`` and one ``user_order`` message as the exchange sends them (a ``sid`` each)."""
    order = sample_order()
    fill = fill_message(
        order, Decimal(1), is_taker=False, post_position=1.0, ts_ms=order.updated_ms
    )
    update = user_order_message(order)
    return (
        orjson.dumps({"type": fill["type"], "sid": 1, **fill}).decode(),
        orjson.dumps({"type": update["type"], "sid": 2, **update}).decode(),
    )


async def _send_burst(
    stream: trio.abc.Stream, ws: WSConnection, count: int, gap_us: int, texts: Sequence[str]
) -> None:
    """Send ``count`` messages ``gap_us`` apart, then the ``bench_done`` message."""
    sent_ns: list[int] = []
    for number in range(count):
        data = ws.send(TextMessage(data=texts[number % len(texts)]))
        if gap_us and number:
            await trio.sleep(gap_us / 1e6)
        sent_ns.append(time.perf_counter_ns())
        await stream.send_all(data)
    done = orjson.dumps({"type": "bench_done", "sent_ns": sent_ns}).decode()
    await stream.send_all(ws.send(TextMessage(data=done)))


async def _session(stream: trio.SSLStream[trio.SocketStream]) -> None:
    """One connection: the handshake accepted, then commands answered until it closes."""
    ws = WSConnection(ConnectionType.SERVER)
    texts = stream_messages()
    command: list[str] = []
    try:
        while True:
            for event in ws.events():
                if isinstance(event, Request):
                    await stream.send_all(ws.send(AcceptConnection()))
                elif isinstance(event, Ping):
                    await stream.send_all(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    await stream.send_all(ws.send(event.response()))
                    return
                elif isinstance(event, TextMessage):
                    command.append(event.data)
                    if event.message_finished:
                        asked: dict[str, Any] = orjson.loads("".join(command))
                        command = []
                        count = min(int(asked["count"]), MAX_COUNT)
                        await _send_burst(stream, ws, count, int(asked["gap_us"]), texts)
            data = await stream.receive_some(RECEIVE_BYTES)
            if not data:
                return
            ws.receive_data(bytes(data))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the client went away
    finally:
        await trio.aclose_forcefully(stream)


async def serve(
    cert_file: str, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve on an ephemeral port of 127.0.0.1 until cancelled; reports the port when listening."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file)
    listeners = await trio.open_ssl_over_tcp_listeners(0, context, host="127.0.0.1")
    transport = listeners[0].transport_listener
    assert isinstance(transport, trio.SocketListener)
    port: int = transport.socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, _session, listeners)
        task_status.started(port)


async def _main(cert_file: str) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(serve, cert_file)
            print(json.dumps({"port": port}), flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.experiments.stream_server", description=__doc__
    )
    parser.add_argument("--cert", required=True, help="the server's certificate and key (PEM)")
    args = parser.parse_args(argv)
    trio.run(_main, args.cert)
    return 0


if __name__ == "__main__":
    sys.exit(main())
