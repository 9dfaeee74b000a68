"""An order's HTTP response, parsed by llhttp (through httptools), the C parser aiohttp also uses.

The order connection (``executor.exchange.orders.connection``) feeds every byte it reads to one
:class:`ResponseReader` per response and asks it when the response is whole. Nothing here parses
HTTP by hand: framing (``Content-Length``, chunked encoding), the status line, header syntax and
keep-alive are llhttp's. Measured on this machine (docs/performance/notebook/, 2026-12-01 "the
order's round trip"), h11 took ~80 µs of pure Python per order to be told of the request and to
parse a ~300-byte answer, in a hot loop; llhttp takes 1-5 µs. The request is still made from a
template tested byte for byte against h11's serialisation (``order_template``).

Only what an order needs is kept: the status code, the reason phrase, the body and whether the
connection may carry another order. An informational (1xx) response is skipped; the final one is
read. A response the parser refuses, or one whose body passes ``MAX_RESPONSE_BYTES``, raises
:class:`ValueError` (the connection is then dropped and the order is ambiguous). A response
framed by the end of the stream (no length, not chunked) is never whole here: the connection's
end is then reported as the exchange closing without answering (ambiguous too).

Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

import httptools

MAX_RESPONSE_BYTES: Final = 1024 * 1024
"""Largest response body accepted (bytes): an order answer is ~300; past this the exchange (or
something in between) is not answering an order and the connection is dropped."""


class ResponseReader:
    """The one response to one order request; feed it bytes until :attr:`complete`.

    Attributes:
        status: the final response's status code (0 until its status line was read).
        reason: its reason phrase.
        complete: true once the final (non-1xx) response was read whole.
        extra: true when bytes followed it.
        reusable: whether the connection may carry the next order: the response was whole, the
            exchange did not ask to close, and no byte followed it.
    """

    __slots__ = (
        "_chunks",
        "_keep_alive",
        "_parser",
        "_size",
        "complete",
        "extra",
        "reason",
        "status",
    )

    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._chunks: list[bytes] = []
        self._size = 0
        self.status = 0
        self.reason = ""
        self.complete = False
        self.extra = False
        self._keep_alive = False

    def feed(self, data: bytes) -> bool:
        """Parse ``data``; True once the final response is whole.

        Raises:
            ValueError: the bytes are not an HTTP/1.x response, or its body is too large.
        """
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            if self.complete:  # garbage after a whole answer: keep it, never reuse the connection
                self.extra = True
                return True
            if isinstance(error, httptools.HttpParserUpgrade):
                raise ValueError("the exchange answered an order with an upgrade") from None
            raise ValueError(f"malformed response: {error}") from None
        if self._size > MAX_RESPONSE_BYTES:
            raise ValueError(f"response body over {MAX_RESPONSE_BYTES} bytes")
        return self.complete

    @property
    def body(self) -> bytes:
        """The final response's body, whole once :attr:`complete`."""
        return b"".join(self._chunks)

    @property
    def reusable(self) -> bool:
        return self.complete and not self.extra and self._keep_alive

    # llhttp's callbacks (called from inside ``feed_data``)

    def on_message_begin(self) -> None:
        if self.complete:
            self.extra = True  # bytes after the answer: the connection is not reused

    def on_status(self, status: bytes) -> None:
        self.reason += status.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        if self.complete:
            return
        self._size += len(body)
        if self._size <= MAX_RESPONSE_BYTES:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self.complete:
            return
        status = self._parser.get_status_code()
        if status < 200:  # informational: the final response follows on the same stream
            self.reason = ""
            self._chunks.clear()
            self._size = 0
            return
        self.status = status
        self._keep_alive = bool(self._parser.should_keep_alive())  # only known in here
        self.complete = True


__all__ = ["MAX_RESPONSE_BYTES", "ResponseReader"]
