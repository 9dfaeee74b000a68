"""``decode_wake`` then ``wake_message_of``: the two halves of ``decode_wake_message``."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from executor.wire.protocol import (
    DecodeError,
    decode_wake,
    decode_wake_message,
    encode_frame,
    wake_message_of,
)
from tests.support.inprocess import make_wake


def test_two_halves_build_the_same_message() -> None:
    """Decoding first and building the dataclass after gives exactly decode_wake_message's."""
    body = encode_frame(make_wake("halves", dry_run=True, exchange_index=3))[4:]
    decoded = decode_wake(body)
    assert (decoded.correlation_id, decoded.dry_run) == ("halves", True)
    message = wake_message_of(decoded)
    assert message == decode_wake_message(body)
    assert dataclasses.asdict(message) == dataclasses.asdict(decode_wake_message(body))


@pytest.mark.parametrize(
    "change",
    [{"dry_run": 1}, {"exchange_index": 1.5}, {"surprise": True}, {"direction": "maybe"}],
)
def test_decode_wake_refuses_what_decode_wake_message_refuses(change: dict[str, object]) -> None:
    """The strict checks happen in the first half: a bad body fails there with the same error."""
    fields = {**dataclasses.asdict(make_wake("bad")), **change}
    body = orjson.dumps(fields)
    with pytest.raises(DecodeError) as first:
        decode_wake(body)
    with pytest.raises(DecodeError) as whole:
        decode_wake_message(body)
    assert str(first.value) == str(whole.value)
