"""Hot-loop cost of one order response: h11 (told of the request, then parsing) vs httptools.

Run from the repository root: ``.venv/bin/python bench/results/2026-12-01-fire-path/parse_ab.py``.
"""

from __future__ import annotations

import statistics
import time

import h11
import httptools

from executor.exchange.orders.template import OrderTemplate

BODY = (
    b'{"order_id":"0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9",'
    b'"client_order_id":"00000000000000000000000000000007","fill_count":"1.00",'
    b'"remaining_count":"0.00","average_fill_price":"0.4200","average_fee_paid":"0.0100",'
    b'"ts_ms":1787289600123}'
)
RESPONSE = (
    b"HTTP/1.1 201 Created\r\ndate: Tue, 01 Dec 2026 21:00:00 GMT\r\nserver: fake\r\n"
    b"content-type: application/json\r\ncontent-length: " + str(len(BODY)).encode() + b"\r\n\r\n"
) + BODY
REQUEST_BODY = (
    b'{"ticker":"KXTEST","client_order_id":"00000000000000000000000000000007","side":"bid",'
    b'"count":"1.00","price":"0.4200","time_in_force":"fill_or_kill",'
    b'"self_trade_prevention_type":"taker_at_cross","post_only":false,"exchange_index":0}'
)
TEMPLATE = OrderTemplate("127.0.0.1:4443", "key")
CONNECTION = h11.Connection(h11.CLIENT)


def h11_told() -> None:
    for event in TEMPLATE.h11_events(REQUEST_BODY):
        CONNECTION.send(event)


def h11_parse() -> tuple[int, bytes]:
    CONNECTION.receive_data(RESPONSE)
    status, chunks = 0, []
    while True:
        event = CONNECTION.next_event()
        if isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            chunks.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            break
    CONNECTION.start_next_cycle()
    return status, b"".join(chunks)


class Collector:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)


def llhttp_parse() -> tuple[int, bytes]:
    collector = Collector()
    parser = httptools.HttpResponseParser(collector)
    parser.feed_data(RESPONSE)
    return parser.get_status_code(), b"".join(collector.chunks)


def main() -> None:
    told, parsed, llhttp = [], [], []
    for _ in range(3000):
        start = time.perf_counter_ns()
        h11_told()
        middle = time.perf_counter_ns()
        result = h11_parse()
        end = time.perf_counter_ns()
        assert result == llhttp_parse()
        again = time.perf_counter_ns()
        llhttp_parse()
        llhttp.append(time.perf_counter_ns() - again)
        told.append(middle - start)
        parsed.append(end - middle)
    for name, samples in (("h11 told", told), ("h11 parse", parsed), ("llhttp parse", llhttp)):
        print(f"{name:13} p50 {statistics.median(samples[500:]) / 1000:6.2f} us")


if __name__ == "__main__":
    main()
