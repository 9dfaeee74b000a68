"""The order response parser (llhttp through httptools): status, reason, body and keep-alive as
h11 reads the same bytes, whatever the framing and however the bytes are cut; refusals."""

from __future__ import annotations

import h11
import pytest

from executor.exchange.orders.response import MAX_RESPONSE_BYTES, ResponseReader

BODY = b'{"order":{"order_id":"k-1","fill_count":"1.00","remaining_count":"0.00"}}'

RESPONSES = {
    "length": b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(BODY)).encode()
    + b"\r\n\r\n"
    + BODY,
    "chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    + f"{len(BODY[:20]):x}".encode()
    + b"\r\n"
    + BODY[:20]
    + b"\r\n"
    + f"{len(BODY[20:]):x}".encode()
    + b"\r\n"
    + BODY[20:]
    + b"\r\n0\r\n\r\n",
    "informational first": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\n"
    b"content-length: 2\r\n\r\n{}",
    "close": b"HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\n"
    b"content-length: 0\r\n\r\n",
    "empty reason": b"HTTP/1.1 204 \r\n\r\n",
}


def _h11_reading(data: bytes) -> tuple[int, str, bytes, bool]:
    """What h11 makes of a response to one POST: the oracle the parser is held to."""
    client = h11.Connection(h11.CLIENT)
    headers = [("Host", "h"), ("Content-Length", "0")]
    client.send(h11.Request(method="POST", target="/", headers=headers))
    client.send(h11.EndOfMessage())
    client.receive_data(data)
    status, reason, chunks = 0, "", []
    while True:
        event = client.next_event()
        if isinstance(event, h11.Response):
            status, reason = event.status_code, event.reason.decode("latin-1")
        elif isinstance(event, h11.Data):
            chunks.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            break
    reusable = client.our_state is h11.DONE and client.their_state is h11.DONE
    return status, reason, b"".join(chunks), reusable


@pytest.mark.parametrize("name", sorted(RESPONSES))
@pytest.mark.parametrize("cut", [None, 1, 7])
def test_the_parser_reads_what_h11_reads(name: str, cut: int | None) -> None:
    """Whole or fed in pieces, every response reads as h11 reads it, complete only at its end."""
    data = RESPONSES[name]
    reader = ResponseReader()
    pieces = [data] if cut is None else [data[i : i + cut] for i in range(0, len(data), cut)]
    for piece in pieces[:-1]:
        assert not reader.feed(piece)
    assert reader.feed(pieces[-1])
    assert (reader.status, reader.reason, reader.body, reader.reusable) == _h11_reading(data)


def test_bytes_after_the_answer_make_the_connection_not_reusable() -> None:
    """The exchange never speaks first: anything after a whole answer ends the connection."""
    reader = ResponseReader()
    assert reader.feed(RESPONSES["length"] + b"HTTP/1.1 200 OK\r\n")
    assert reader.status == 201 and not reader.reusable
    garbage = ResponseReader()
    assert garbage.feed(RESPONSES["length"] + b"\x00\x01 not http")
    assert garbage.body == BODY and not garbage.reusable
    clean = ResponseReader()
    assert clean.feed(RESPONSES["length"]) and clean.reusable  # the twin: nothing after it


def test_a_malformed_or_oversized_response_is_refused() -> None:
    """Bytes that are no HTTP response, or a body past the limit, raise ValueError."""
    with pytest.raises(ValueError, match="malformed"):
        ResponseReader().feed(b"SMTP ready\r\n\r\n")
    big = MAX_RESPONSE_BYTES + 1
    head = f"HTTP/1.1 200 OK\r\ncontent-length: {big}\r\n\r\n".encode()
    with pytest.raises(ValueError, match="over"):
        ResponseReader().feed(head + b"x" * big)


def test_a_response_framed_by_the_end_of_the_stream_is_never_whole() -> None:
    """No length and not chunked: it is not complete, so the stream's end reads as no answer."""
    reader = ResponseReader()
    assert not reader.feed(b"HTTP/1.1 200 OK\r\n\r\n{}")
    assert not reader.complete
