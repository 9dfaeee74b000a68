# Run from the repository root: .venv/bin/python docs/results/2026-12-01-fire-path/parse_ab.py
"""Hot-loop cost of parsing one order response: h11 (as OrderConnection does) vs httptools."""
import time, statistics, h11, httptools
from executor.exchange.order_template import OrderTemplate

body = b'{"order_id":"0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9","client_order_id":"00000000000000000000000000000007","fill_count":"1.00","remaining_count":"0.00","average_fill_price":"0.4200","average_fee_paid":"0.0100","ts_ms":1787289600123}'
response = (b"HTTP/1.1 201 Created\r\ndate: Tue, 01 Dec 2026 21:00:00 GMT\r\nserver: fake\r\ncontent-type: application/json\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
template = OrderTemplate("127.0.0.1:4443", "key")
req_body = b'{"ticker":"KXTEST","client_order_id":"00000000000000000000000000000007","side":"bid","count":"1.00","price":"0.4200","time_in_force":"fill_or_kill","self_trade_prevention_type":"taker_at_cross","post_only":false,"exchange_index":0}'

conn = h11.Connection(h11.CLIENT)
def h11_cycle():
    for event in template.h11_events(req_body):
        conn.send(event)
    conn.receive_data(response)
    chunks = []
    while True:
        e = conn.next_event()
        if isinstance(e, h11.Response): status = e.status_code
        elif isinstance(e, h11.Data): chunks.append(e.data)
        elif isinstance(e, h11.EndOfMessage): break
    conn.start_next_cycle()
    return status, b"".join(chunks)

class P:
    __slots__ = ("chunks", "done")
    def __init__(self): self.chunks = []; self.done = False
    def on_body(self, b): self.chunks.append(b)
    def on_message_complete(self): self.done = True
def httptools_cycle():
    p = P()
    parser = httptools.HttpResponseParser(p)
    parser.feed_data(response)
    return parser.get_status_code(), b"".join(p.chunks)

assert h11_cycle() == httptools_cycle()
for name, f in (("h11", h11_cycle), ("httptools", httptools_cycle)) * 2:
    best = []
    for _ in range(9):
        t = time.perf_counter_ns()
        for _ in range(2000): f()
        best.append((time.perf_counter_ns() - t) / 2000 / 1000)
    print(f"{name:10} best {min(best):6.2f} us  median {statistics.median(best):6.2f} us")

conn2 = h11.Connection(h11.CLIENT)
def h11_send_only():
    for event in template.h11_events(req_body):
        conn2.send(event)
    conn2.receive_data(response)
    while not isinstance(conn2.next_event(), h11.EndOfMessage): pass
    conn2.start_next_cycle()
t_send = []; 
import itertools
def timed(f, n=2000):
    t = time.perf_counter_ns()
    for _ in range(n): f()
    return (time.perf_counter_ns() - t) / n / 1000
conn3 = h11.Connection(h11.CLIENT)
events = template.h11_events(req_body)
def send_part():
    for e in events: conn3.send(e)
def parse_part():
    conn3.receive_data(response)
    while not isinstance(conn3.next_event(), h11.EndOfMessage): pass
    conn3.start_next_cycle()
s = []; p = []
for _ in range(2000):
    a = time.perf_counter_ns(); send_part(); b = time.perf_counter_ns(); parse_part(); c = time.perf_counter_ns()
    s.append(b - a); p.append(c - b)
print("h11 send events median us", statistics.median(s) / 1000, " parse median us", statistics.median(p) / 1000)
