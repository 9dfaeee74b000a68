"""The order request template writes exactly the bytes h11 would write for the same request."""

from __future__ import annotations

import h11
import pytest

from executor.exchange.messages import ORDER_PATH, OrderSpec, order_body
from executor.exchange.orders.template import OrderTemplate
from executor.signer import HEADER_KEY, HEADER_SIGNATURE, HEADER_TIMESTAMP

SIGNATURE = "QUJD" * 86 + "RA=="
"""A base64 string of a real signature's length (344 characters)."""


def _bodies() -> list[bytes]:
    bodies = []
    for side in ("bid", "ask"):
        for tif in ("fill_or_kill", "good_till_canceled", "immediate_or_cancel"):
            for ticker, count in (("KXTEST", 1), ("KXBTCD-26AUG2917-T112750", 125)):
                spec = OrderSpec(
                    ticker=ticker,
                    client_order_id="0123456789abcdef0123456789abcdef",
                    side=side,
                    count=count,
                    price="0.4200",
                    time_in_force=tif,
                    self_trade_prevention_type="taker_at_cross",
                    exchange_index=-1 if count > 1 else 2,
                    # Issue 22's keys on half the bodies: the executor sends both, others neither.
                    cancel_order_on_pause=(side == "bid") if count > 1 else None,
                    order_group_id="0f1e2d3c4b5a69788796a5b4c3d2e1f0" if count > 1 else None,
                )
                bodies.append(order_body(spec))
    return bodies


def _h11_bytes(template: OrderTemplate, timestamp: str, signature: str, body: bytes) -> bytes:
    """What h11 serialises for the request: head, body, end of message."""
    connection = h11.Connection(h11.CLIENT)
    head = h11.Request(
        method="POST", target=ORDER_PATH, headers=template.headers(timestamp, signature, body)
    )
    data = connection.send(head) or b""
    data += connection.send(h11.Data(data=body)) or b""
    data += connection.send(h11.EndOfMessage()) or b""
    return data


@pytest.mark.parametrize("body", _bodies(), ids=lambda body: str(len(body)))
def test_template_bytes_equal_h11s_serialisation(body: bytes) -> None:
    """For every side, time in force and body length the template and h11 agree byte for byte."""
    template = OrderTemplate("127.0.0.1:8443", "a3f1c2d4-0000-4000-8000-000000000001")
    for timestamp in ("1703123456789", "1999999999999"):
        expected = _h11_bytes(template, timestamp, SIGNATURE, body)
        assert template.request(timestamp, SIGNATURE, body) == expected


def test_the_request_carries_the_kalshi_headers_and_the_length() -> None:
    """The three Kalshi headers, the JSON type and the body's length are where h11 reads them."""
    template = OrderTemplate("external-api.demo.kalshi.co", "key-1")
    body = _bodies()[0]
    server = h11.Connection(h11.SERVER)
    server.receive_data(template.request("1703123456789", SIGNATURE, body))
    request = server.next_event()
    assert isinstance(request, h11.Request)
    headers = {name.decode(): value.decode() for name, value in request.headers}
    assert headers["host"] == "external-api.demo.kalshi.co"
    assert headers[HEADER_KEY.lower()] == "key-1"
    assert headers[HEADER_TIMESTAMP.lower()] == "1703123456789"
    assert headers[HEADER_SIGNATURE.lower()] == SIGNATURE
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(body))
    data = server.next_event()
    assert isinstance(data, h11.Data) and data.data == body
    assert isinstance(server.next_event(), h11.EndOfMessage)


def test_h11_is_told_the_same_framing() -> None:
    """The events handed to h11 for a request frame exactly the body the template wrote."""
    template = OrderTemplate("h.test", "key-1")
    body = _bodies()[3]
    client = h11.Connection(h11.CLIENT)
    for event in template.h11_events(body):
        client.send(event)
    assert client.our_state is h11.DONE
    head, _, _ = template.h11_events(body)
    assert (b"content-length", str(len(body)).encode()) in list(head.headers)


@pytest.mark.parametrize("value", ["", "two words", "line\r\nbreak", "nul\x00"])
def test_a_key_id_or_host_that_is_not_a_plain_header_value_is_refused(value: str) -> None:
    """Nothing that could break the header block gets into the template."""
    with pytest.raises(ValueError, match="plain header value"):
        OrderTemplate("h.test", value)
    with pytest.raises(ValueError, match="plain header value"):
        OrderTemplate(value, "key-1")
