"""One order connection: a standard-library TLS socket in non-blocking mode, Trio waiting on it.

The order's request goes out in one ``SSLSocket.send`` that returns as soon as the kernel has the
bytes (the ``wire`` stamp is taken right there, before any pass through the scheduler), and the
response is read with ``recv`` until its parser says it is complete; Trio's ``wait_readable`` /
``wait_writable`` park the task only when the socket has nothing to give or no room. Measured
against ``trio.SSLStream`` over the same fake (``bench/experiments/order_wire.py``,
docs/performance/notebook/ 2026-12-01) it is the faster of the two; it is correct under cancellation
for the same reason the stream would be: **a connection is reused only after a whole request and a
whole response went through it**. Any exception or cancellation inside
:meth:`OrderConnection.exchange` closes it, so no half-written request or half-read response is ever
followed by another order.

What a failure means for the order (the transport turns it into its error classes):

- nothing of the request was written: a plain ``ExchangeError`` (retryable, not placed);
- a byte was written and then the connection broke, or the answer was malformed:
  :class:`~executor.exchange.messages.ExchangeAmbiguous`, never retried (reconciliation decides).

An order may be begun where its fire is decided (:meth:`OrderConnection.begin`: the non-blocking
``send`` and the ``wire`` stamp, no waiting) and finished in the fire's own task
(:meth:`OrderConnection.finish`: the rest of the request if the kernel's buffer was full, then
the response); :meth:`OrderConnection.exchange` is the two in one.

Nothing parses HTTP by hand: the request comes from a template tested byte for byte against h11's
serialisation, and every response byte goes through llhttp (``executor.exchange.orders.response``).
"""

from __future__ import annotations

import select
import socket
import ssl
from dataclasses import dataclass
from typing import Final

import trio
from trio.lowlevel import notify_closing, wait_readable, wait_writable

from executor.clock import stamp_ns
from executor.exchange.messages import ExchangeAmbiguous, ExchangeError, OrderStamps
from executor.exchange.orders.response import MAX_RESPONSE_BYTES, ResponseReader
from executor.exchange.orders.template import OrderTemplate

READ_BYTES: Final = 64 * 1024
"""Bytes asked of one ``recv``: an order's answer is a few hundred bytes, so one read holds it."""


class OrderConnection:
    """One keep-alive TLS connection used by one order at a time; made by :meth:`open`.

    Attributes:
        number: this process's count of order connections opened, for logs and tests.
        closed: true once closed (by a failure, a cancellation or :meth:`close`); never reopened.
        idle_since: ``trio.current_time()`` when it last went idle.
    """

    def __init__(self, tls: ssl.SSLSocket, template: OrderTemplate, number: int) -> None:
        self._tls = tls
        self._reader = ResponseReader()
        """The current order's response parser (made once its request is written)."""
        self._poll = select.poll()
        self._poll.register(tls.fileno(), select.POLLIN)
        self.template = template
        self.number = number
        self.closed = False
        self.idle_since = trio.current_time()
        self._written = False
        self._unsent = memoryview(b"")
        """What :meth:`begin` left for :meth:`finish` to send."""
        self._body = b""
        self._failure: BaseException | None = None
        """What :meth:`begin` caught, for :meth:`finish` to raise."""

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        context: ssl.SSLContext,
        template: OrderTemplate,
        number: int,
    ) -> OrderConnection:
        """Connect and complete the TLS handshake (certificate and host name verified).

        Raises:
            OSError: the TCP connection failed.
            ssl.SSLError: the handshake failed (an untrusted certificate among others).

        Cancellation: a half-open connection is closed.
        """
        return cls(await open_tls_socket(host, port, context), template, number)

    def idle_is_dead(self) -> bool:
        """Whether this idle connection can no longer carry an order (non-blocking, a few µs).

        The exchange never speaks first on HTTP/1.1: bytes waiting on an idle connection are its
        close (a TLS close_notify, a FIN or a reset) or garbage; either way the connection is
        finished. TLS records that carry no application data (TLS 1.3 session tickets) are read
        and leave it alive.
        """
        if self.closed:
            return True
        if not self._tls.pending() and not self._poll.poll(0):
            return False
        try:
            self._tls.recv(READ_BYTES)
        except ssl.SSLWantReadError:
            return False
        except (OSError, ValueError):
            pass
        self.close()
        return True

    async def exchange(
        self, request: bytes, body: bytes, stamps: OrderStamps
    ) -> tuple[int, str, bytes]:
        """Write ``request`` (whose body is ``body``), stamp ``wire_ns``, read the whole response.

        :meth:`begin` then :meth:`finish`: returns ``(status, reason, body)``. The connection
        stays open for the next order only when the response was whole, nothing followed it and
        the exchange did not ask to close.

        Raises:
            ExchangeError: the connection failed before any byte of the request was written.
            ExchangeAmbiguous: it failed after (the order may have been placed).

        Cancellation: the connection is closed (a request may be half written); nothing else.
        """
        self.begin(request, body, stamps)
        return await self.finish(stamps)

    def begin(self, request: bytes, body: bytes, stamps: OrderStamps) -> None:
        """Hand ``request`` to the kernel now, as much of it as it takes, without waiting.

        Whatever is left (the kernel's buffer was full) and any failure are kept for
        :meth:`finish`, which must follow: it raises the failure or sends the rest. When every
        byte went, ``wire_ns`` is stamped here, right after the ``send`` that took the last one.
        """
        self._written = False
        self._unsent = memoryview(request)
        self._body = body
        self._failure = None
        try:
            self._send_now()
            if not self._unsent:
                self._wrote_all(stamps)
        except Exception as error:  # raised by finish(), inside its error handling
            self._failure = error

    async def finish(self, stamps: OrderStamps) -> tuple[int, str, bytes]:
        """Send what :meth:`begin` could not, then read the whole response (see :meth:`exchange`).

        Raises:
            ExchangeError: the connection failed before any byte of the request was written.
            ExchangeAmbiguous: it failed after (the order may have been placed).

        Cancellation: the connection is closed (a request may be half written); nothing else.
        """
        try:
            if self._failure is not None:
                raise self._failure
            if self._unsent:
                await self._send_rest()
                self._wrote_all(stamps)
            return await self._read_response()
        except BaseException as error:
            self.close()
            if isinstance(error, (OSError, ValueError)):
                raise _failure(error, written=self._written) from None
            raise
        finally:
            self._failure = None
            self._unsent = memoryview(b"")

    def _wrote_all(self, stamps: OrderStamps) -> None:
        stamps.wire_ns = stamp_ns()
        self._reader = self._new_reader(self._body)

    def _send_now(self) -> bool:
        """One non-blocking ``send`` of the unsent bytes; False when TLS wants to wait first."""
        try:
            sent = self._tls.send(self._unsent)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return False
        self._written = True
        self._unsent = self._unsent[sent:]
        return True

    async def _send_rest(self) -> None:
        """Send every unsent byte; ``_written`` turns true with the first byte the kernel took."""
        while self._unsent:
            try:
                sent = self._tls.send(self._unsent)
            except ssl.SSLWantWriteError:
                await wait_writable(self._tls)
                continue
            except ssl.SSLWantReadError:
                await wait_readable(self._tls)
                continue
            self._written = True
            self._unsent = self._unsent[sent:]

    async def _read_response(self) -> tuple[int, str, bytes]:
        reader = self._reader
        while True:
            data = await self._receive()
            if not data:
                raise ConnectionResetError("the exchange closed the connection before answering")
            if reader.feed(data):
                break
        if reader.reusable:
            self.idle_since = trio.current_time()
        else:
            self.close()  # the exchange asked to close, or sent more than its answer
        return reader.status, reader.reason, reader.body

    def _new_reader(self, body: bytes) -> ResponseReader:
        """The parser of the response to the request just written (whose body is ``body``)."""
        return ResponseReader()

    async def _receive(self) -> bytes:
        """The next decrypted bytes; ``b""`` at the end of the stream."""
        return await receive_tls(self._tls)

    def close(self) -> None:
        """Close now, without a TLS goodbye (nothing to wait for); idempotent."""
        if self.closed:
            return
        self.closed = True
        notify_closing(self._tls)
        self._tls.close()


@dataclass(frozen=True, slots=True)
class OrderInFlight:
    """A real attempt begun on ``connection`` (``send_order_now``), its response still to read."""

    connection: OrderConnection


async def open_tls_socket(host: str, port: int, context: ssl.SSLContext) -> ssl.SSLSocket:
    """A non-blocking stdlib TLS socket to ``host:port``, its handshake done (certificate and host
    name verified), Trio waiting whenever TLS would block.

    Raises:
        OSError: the TCP connection failed.
        ssl.SSLError: the handshake failed (an untrusted certificate among others).

    Cancellation: a half-open connection is closed.
    """
    stream = await trio.open_tcp_stream(host, port)  # TCP_NODELAY is Trio's default
    raw = socket.socket(fileno=stream.socket.detach())
    raw.setblocking(False)
    try:
        tls = context.wrap_socket(raw, server_hostname=host, do_handshake_on_connect=False)
    except BaseException:
        raw.close()
        raise
    try:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await wait_readable(tls)
            except ssl.SSLWantWriteError:
                await wait_writable(tls)
    except BaseException:
        notify_closing(tls)
        tls.close()
        raise
    return tls


async def receive_tls(tls: ssl.SSLSocket, size: int = READ_BYTES) -> bytes:
    """The next decrypted bytes of ``tls`` (at most ``size``); ``b""`` at the end of the
    stream."""
    while True:
        try:
            return tls.recv(size)
        except ssl.SSLWantReadError:
            await wait_readable(tls)
        except ssl.SSLWantWriteError:
            await wait_writable(tls)
        except ssl.SSLEOFError:
            return b""  # the peer closed without a TLS close_notify


def _failure(error: BaseException, *, written: bool) -> ExchangeError:
    detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if written:
        return ExchangeAmbiguous(f"connection lost after the order was sent: {detail}")
    return ExchangeError(
        f"connection error before the order was sent: {detail}", maybe_placed=False
    )


__all__ = [
    "MAX_RESPONSE_BYTES",
    "READ_BYTES",
    "OrderConnection",
    "OrderInFlight",
    "open_tls_socket",
    "receive_tls",
]
