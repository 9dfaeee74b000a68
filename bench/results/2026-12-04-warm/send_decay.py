"""The two halves of an order's ``write`` timed hot and after the process slept (BENCHMARK.md H8).

A 470-byte request, the size of the executor's order request: (1) encrypted by a TLS 1.3 client
into memory (``ssl.MemoryBIO``, handshaken with an in-memory server; no socket), and (2) handed to
the kernel by a plain TCP ``send`` over loopback to a reader process on CPU 0 (TCP_NODELAY), and
(3) both at once through an ``ssl.SSLSocket`` to a TLS reader on CPU 0, as the executor's order
connection does. This process runs on CPU 1 (the pinned executor's). Each sample sleeps, then
times one call; the median per gap is printed. Run from the repository root:
``.venv/bin/python bench/results/2026-12-04-warm/send_decay.py``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import ssl
import statistics
import time
from collections.abc import Callable

import trustme

REQUEST = b"POST /trade-api/v2/portfolio/orders HTTP/1.1\r\n" + b"x" * 424
GAPS_S = (0.0005, 0.004, 0.15)
CA = trustme.CA()
CERT = CA.issue_cert("localhost")


def reader(ports: multiprocessing.Queue[int], tls: bool) -> None:
    """Accept one connection on CPU 0 and read until it closes."""
    os.sched_setaffinity(0, {0})
    listener = socket.create_server(("127.0.0.1", 0))
    ports.put(listener.getsockname()[1])
    connection, _ = listener.accept()
    if tls:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        CERT.configure_cert(context)
        connection = context.wrap_socket(connection, server_side=True)
    while connection.recv(65536):
        pass


def connect(tls: bool) -> tuple[socket.socket, multiprocessing.Process]:
    """A connection to a fresh reader process (TLS or plain TCP)."""
    ports: multiprocessing.Queue[int] = multiprocessing.Queue()
    process = multiprocessing.Process(target=reader, args=(ports, tls))
    process.start()
    sock = socket.create_connection(("127.0.0.1", ports.get()))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls:
        context = ssl.create_default_context()
        CA.configure_trust(context)
        sock = context.wrap_socket(sock, server_hostname="localhost")
    return sock, process


def memory_tls() -> Callable[[], object]:
    """A handshaken in-memory TLS client; the returned call encrypts one request."""
    client_context = ssl.create_default_context()
    CA.configure_trust(client_context)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    CERT.configure_cert(server_context)
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(client_in, client_out, server_hostname="localhost")
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(4):
        for end in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())

    def encrypt() -> object:
        client.write(REQUEST)
        return client_out.read()

    return encrypt


def median_us(call: Callable[[], object], samples: int, gap_s: float) -> float:
    """Median of ``samples`` calls, each after ``gap_s`` asleep."""
    timed = []
    for _ in range(samples):
        time.sleep(gap_s)
        start = time.perf_counter_ns()
        call()
        timed.append(time.perf_counter_ns() - start)
    return round(statistics.median(timed) / 1000, 1)


def main() -> None:
    os.sched_setaffinity(0, {1})
    plain, plain_reader = connect(tls=False)
    secure, secure_reader = connect(tls=True)
    cases: dict[str, Callable[[], object]] = {
        "TLS encryption into memory": memory_tls(),
        "plain TCP send": lambda: plain.send(REQUEST),
        "TLS socket send": lambda: secure.send(REQUEST),
    }
    for name, call in cases.items():
        median_us(call, 200, 0.001)
        results = ", ".join(
            f"{gap * 1000:g} ms: {median_us(call, 40 if gap > 0.1 else 300, gap)} us"
            for gap in GAPS_S
        )
        print(f"{name}: median after asleep {results}")
    for sock, process in ((plain, plain_reader), (secure, secure_reader)):
        # shutdown, not only close: the second reader was forked holding the first socket too
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        process.join()


if __name__ == "__main__":
    main()
