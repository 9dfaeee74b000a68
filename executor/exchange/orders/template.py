"""The order request as a template: everything but four fields serialised once, at start-up.

An order request differs from the previous one only in the signed timestamp, the signature, the
body and the body's length; method, path, ``Host`` and the static headers never change. So the
request line and the static headers are bytes made once, and an order's request is four slices
joined around them (a few µs), where h11 validates and serialises every header on every request
and httpx first builds its own request and header models (hundreds of µs on this machine,
docs/performance/notebook/ 2026-12-01).

The template is not a second HTTP implementation: its output is tested byte for byte against h11's
serialisation of the same request (``tests/exchange/test_order_template.py``). The response is
parsed by llhttp (``executor.exchange.orders.response``); :meth:`OrderTemplate.h11_events` gives
the same request's framing to an h11 client (the benchmark's A/B of the two parsers).

Field values come from places that cannot hold CR or LF (a decimal timestamp, base64, the key id
checked at start-up), so no header injection is possible; :class:`OrderTemplate` refuses a key id
or host that is not a plain header token.
"""

from __future__ import annotations

import re
from typing import Final

import h11

from executor.exchange.messages import JSON_CONTENT_TYPE, ORDER_PATH
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP

USER_AGENT: Final = "trio-executor"
"""``User-Agent`` of order requests: names the client to the exchange's logs, and nothing more."""

MAX_CACHED_HEADS: Final = 64
"""h11 request heads kept, one per body length seen: order bodies vary by a few bytes (ticker,
count, price), so a handful of lengths cover a day; the cap only bounds a pathological caller."""

_SAFE_VALUE: Final = re.compile(r"[\x21-\x7e]+")
"""A header value the template accepts: visible ASCII, no space, no CR or LF."""


class OrderTemplate:
    """The bytes of ``POST`` + the order path to one exchange host, as a template.

    Args:
        host: the ``Host`` header (``host`` or ``host:port``, as the base URL spells it).
        key_id: the API key id (``KALSHI-ACCESS-KEY``).

    Raises:
        ValueError: ``host`` or ``key_id`` is empty or holds characters a header cannot.
    """

    def __init__(self, host: str, key_id: str) -> None:
        for name, value in (("host", host), ("key id", key_id)):
            if not _SAFE_VALUE.fullmatch(value):
                raise ValueError(f"order template: {name} {value!r} is not a plain header value")
        self.host = host
        self.static_headers: tuple[tuple[str, str], ...] = (
            ("Host", host),
            ("User-Agent", USER_AGENT),
            ("Accept", JSON_CONTENT_TYPE),
            ("Content-Type", JSON_CONTENT_TYPE),
            (HEADER_KEY, key_id),
        )
        head = f"POST {ORDER_PATH} HTTP/1.1\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in self.static_headers)
        self._head = f"{head}{HEADER_TIMESTAMP}: ".encode("ascii")
        self._after_timestamp = f"\r\n{HEADER_SIGNATURE}: ".encode("ascii")
        self._after_signature = b"\r\nContent-Length: "
        self._h11_heads: dict[int, h11.Request] = {}

    def request(self, timestamp: str, signature: str, body: bytes) -> bytes:
        """The whole request: head with the three varying header values, then ``body``."""
        return b"".join(
            (
                self._head,
                timestamp.encode("ascii"),
                self._after_timestamp,
                signature.encode("ascii"),
                self._after_signature,
                str(len(body)).encode("ascii"),
                b"\r\n\r\n",
                body,
            )
        )

    def headers(self, timestamp: str, signature: str, body: bytes) -> list[tuple[str, str]]:
        """The request's headers in wire order (what :meth:`request` writes, as pairs)."""
        return [
            *self.static_headers,
            (HEADER_TIMESTAMP, timestamp),
            (HEADER_SIGNATURE, signature),
            ("Content-Length", str(len(body))),
        ]

    def h11_events(self, body: bytes) -> tuple[h11.Request, h11.Data, h11.EndOfMessage]:
        """What h11 must be told was sent, so it parses the response to it.

        The head carries the request's framing (method, target, ``Host``, ``Content-Length``),
        which is all h11's client state machine reads; it is cached per body length, so h11's
        header validation runs once per length, not once per order.
        """
        head = self._h11_heads.get(len(body))
        if head is None:
            head = h11.Request(
                method="POST",
                target=ORDER_PATH,
                headers=[("Host", self.host), ("Content-Length", str(len(body)))],
            )
            if len(self._h11_heads) >= MAX_CACHED_HEADS:
                self._h11_heads.clear()
            self._h11_heads[len(body)] = head
        return head, h11.Data(data=body), h11.EndOfMessage()
