"""executor.wire.protocol against PROTOCOL.md: framing, the strict decoding rules, and the ack
encoders.

Every refusal asserts the exception type, the field it names and the shape of its reason (one line,
bounded); every acceptance rule has its own test, so a decoder that refused everything would fail
as surely as one that accepted everything.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable
from typing import Any, Final

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from executor.wire.protocol import (
    MAX_FRAME_BYTES,
    MAX_REASON_CHARS,
    SCHEMA_VERSION,
    DecodeError,
    FrameTooLargeError,
    WakeAck,
    WakeMessage,
    decode_wake_ack,
    decode_wake_message,
    default_price_ranges,
    encode_accepted_ack,
    encode_frame,
    encode_rejected_ack,
    parse_frame_length,
)

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

REQUIRED: Final[dict[str, Any]] = {
    "schema_version": 4,
    "correlation_id": "0f9e6a2c-7d41-4b8e-9a55-1c2d3e4f5a6b",
    "market_ticker": "KXBTCD-26AUG2917-T112750",
    "asset": "BTC",
    "direction": "yes",
    "kalshi_price": 0.56,
    "model_probability": 0.62,
    "fee": 0.02,
    "edge": 0.06,
    "decision_ts_ms": 1787289600123,
    "sent_at_ms": 1787289600124,
    "sent_at_ns": 412737100845213,
}
"""The twelve v1 fields, which have no default."""

FULL: Final[dict[str, Any]] = {
    **REQUIRED,
    "recv_ns": 412737100311907,
    "clock_domain": "Ivory.local:1787289000",
    "dry_run": True,
    "wire_price_yes_dollars": 0.56,
    "exchange_index": 2,
    "available_size_contracts": 143.0,
    "price_ranges": [[0.0, 0.05, 0.001], [0.05, 0.95, 0.01], [0.95, 1.0, 0.001]],
    "correlation_group": "btc-majors",
}
"""Every v4 field set to a non-default value, in declaration (wire) order."""

WAKE_FIELDS: Final = tuple(f.name for f in dataclasses.fields(WakeMessage))
INT_FIELDS: Final = (
    "schema_version",
    "decision_ts_ms",
    "sent_at_ms",
    "sent_at_ns",
    "recv_ns",
    "exchange_index",
)
FLOAT_FIELDS: Final = (
    "kalshi_price",
    "model_probability",
    "fee",
    "edge",
    "wire_price_yes_dollars",
    "available_size_contracts",
)
STR_FIELDS: Final = (
    "correlation_id",
    "market_ticker",
    "asset",
    "clock_domain",
    "correlation_group",
)
ACK: Final[dict[str, Any]] = {
    "schema_version": 4,
    "correlation_id": "0f9e6a2c-7d41-4b8e-9a55-1c2d3e4f5a6b",
    "received_at_ms": 1787289600125,
    "status": "accepted",
    "reason": None,
}


def _json_object(values: dict[str, Any], raw: dict[str, bytes] | None = None) -> bytes:
    """A JSON object body: ``values`` encoded by orjson, except keys in ``raw`` written verbatim."""
    raw = raw or {}
    members = [
        orjson.dumps(key) + b":" + (raw[key] if key in raw else orjson.dumps(value))
        for key, value in values.items()
    ]
    return b"{" + b",".join(members) + b"}"


def _wake_body(**overrides: Any) -> bytes:
    """The FULL message's body with ``overrides`` applied (unknown keys are appended)."""
    return _json_object({**FULL, **overrides})


def _with_raw(field: str, raw_json: bytes) -> bytes:
    """The FULL message's body with ``field``'s value written as the verbatim ``raw_json``."""
    return _json_object(FULL, {field: raw_json})


def _assert_reason_shape(error: DecodeError) -> str:
    """Check the reason is a non-empty single line within the cap, and return it."""
    reason = str(error)
    assert reason
    assert len(reason) <= MAX_REASON_CHARS
    assert reason.splitlines() == [reason]
    return reason


def _refused(decode: Callable[[bytes], object], body: bytes, field: str | None) -> str:
    """Assert ``decode`` refuses ``body`` with a DecodeError naming ``field``; return the reason."""
    with pytest.raises(DecodeError) as caught:
        decode(body)
    error = caught.value
    assert type(error) is DecodeError
    assert isinstance(error, ValueError)
    assert error.field == field, str(error)
    return _assert_reason_shape(error)


def _refused_wake(body: bytes, field: str | None) -> str:
    return _refused(decode_wake_message, body, field)


def _refused_ack(body: bytes, field: str | None) -> str:
    return _refused(decode_wake_ack, body, field)


# ---------------------------------------------------------------------------------------------
# The baseline: a correct body decodes.


def test_full_body_decodes_to_every_field() -> None:
    """A body carrying all twenty v4 fields decodes to exactly those values."""
    message = decode_wake_message(_wake_body())
    assert dataclasses.asdict(message) == FULL
    assert type(message) is WakeMessage


def test_decoded_message_reencodes_to_the_same_bytes() -> None:
    """Re-encoding a decoded orjson-written body gives the body back byte for byte."""
    body = orjson.dumps(FULL)
    assert encode_frame(decode_wake_message(body)) == struct.pack(">I", len(body)) + body


def test_decoded_message_is_frozen() -> None:
    """A decoded message refuses attribute assignment like a constructed one."""
    message = decode_wake_message(_wake_body())
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.asset = "ETH"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Not valid JSON: refused, field None.


def test_empty_body_is_refused() -> None:
    """An empty body (what a zero-length frame carries) is a parse error."""
    _refused_wake(b"", None)


@pytest.mark.parametrize(
    "bad_bytes",
    [
        pytest.param(b"\xc0\xaf", id="overlong-2-byte-slash"),
        pytest.param(b"\xe0\x80\xaf", id="overlong-3-byte-slash"),
        pytest.param(b"\xf0\x80\x80\xaf", id="overlong-4-byte-slash"),
        pytest.param(b"\xed\xa0\x80", id="encoded-high-surrogate-ED-A0-80"),
        pytest.param(b"\xed\xbf\xbf", id="encoded-low-surrogate-ED-BF-BF"),
        pytest.param(b"\xf4\x90\x80\x80", id="above-U+10FFFF-F4-90-80-80"),
        pytest.param(b"\xf5\x80\x80\x80", id="lead-byte-F5"),
        pytest.param(b"\x80", id="lone-continuation"),
        pytest.param(b"\xe2\x82", id="truncated-sequence"),
        pytest.param(b"\xff", id="byte-FF"),
    ],
)
def test_invalid_utf8_in_a_string_is_refused(bad_bytes: bytes) -> None:
    """Malformed UTF-8 inside a string value is a parse error, whatever field holds it."""
    _refused_wake(_with_raw("asset", b'"B' + bad_bytes + b'C"'), None)


def test_valid_multibyte_utf8_is_accepted() -> None:
    """The negative twin: 2-, 3- and 4-byte UTF-8 sequences at their extremes decode."""
    text = "\u0080\u07ff\u0800\uffff\U00010000\U0010ffff é€🚀"
    message = decode_wake_message(_with_raw("asset", b'"' + text.encode() + b'"'))
    assert message.asset == text


@pytest.mark.parametrize(
    "escape",
    [
        pytest.param(rb"\ud800", id="high-alone"),
        pytest.param(rb"\udbff", id="high-alone-max"),
        pytest.param(rb"\udc00", id="low-alone"),
        pytest.param(rb"\udfff", id="low-alone-max"),
        pytest.param(rb"\ud800x", id="high-then-char"),
        pytest.param(rb"\ud800\u0041", id="high-then-bmp-escape"),
        pytest.param(rb"\udc00\ud800", id="low-then-high"),
        pytest.param(rb"\ud800\ud800", id="high-then-high"),
    ],
)
def test_unpaired_surrogate_escape_is_refused(escape: bytes) -> None:
    """A \\u escape for a surrogate that is not half of a high-low pair is a parse error."""
    _refused_wake(_with_raw("correlation_id", b'"a' + escape + b'"'), None)


@pytest.mark.parametrize(
    ("escape", "expected"),
    [
        pytest.param(rb"\ud83d\ude80", "🚀", id="rocket"),
        pytest.param(rb"\uD83D\uDE80", "🚀", id="rocket-upper-hex"),
        pytest.param(rb"\ud800\udc00", "\U00010000", id="first-astral"),
        pytest.param(rb"\udbff\udfff", "\U0010ffff", id="last-astral"),
    ],
)
def test_surrogate_pair_escape_decodes_to_the_astral_character(
    escape: bytes, expected: str
) -> None:
    """A correct high-low surrogate pair escape decodes to the one astral character."""
    message = decode_wake_message(_with_raw("correlation_id", b'"' + escape + b'"'))
    assert message.correlation_id == expected
    assert len(message.correlation_id) == 1


@pytest.mark.parametrize("control", [0x00, 0x01, 0x08, 0x09, 0x0A, 0x0D, 0x1F])
def test_raw_control_character_in_a_string_is_refused(control: int) -> None:
    """A control character below U+0020 written raw inside a string is a parse error."""
    _refused_wake(_with_raw("asset", b'"a' + bytes([control]) + b'b"'), None)


def test_escaped_control_characters_are_accepted() -> None:
    """The negative twin: the same control characters written as escapes decode."""
    raw = rb'"\u0000\u0001\b\t\n\r\u001f"'
    message = decode_wake_message(_with_raw("asset", raw))
    assert message.asset == "\x00\x01\b\t\n\r\x1f"


@pytest.mark.parametrize(
    "literal",
    [b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf", b"-inf", b"+Infinity"],
)
def test_non_finite_literal_is_refused(literal: bytes) -> None:
    """NaN and the infinities are not JSON, so a float field holding them is a parse error."""
    _refused_wake(_with_raw("kalshi_price", literal), None)


@pytest.mark.parametrize(
    "literal",
    [b"01", b"-01", b"00", b".5", b"-.5", b"1.", b"1.e3", b"+1", b"1e", b"1e+", b"0x10", b"--1"],
)
def test_malformed_number_is_refused(literal: bytes) -> None:
    """Numbers JSON's grammar forbids (leading zero, bare point, plus sign...) are parse errors."""
    _refused_wake(_with_raw("kalshi_price", literal), None)


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (b"0", 0.0),
        (b"0.5", 0.5),
        (b"1e+3", 1000.0),
        (b"1E3", 1000.0),
        (b"1e-3", 0.001),
        (b"-0.25e1", -2.5),
        (b"10.0e00", 10.0),
    ],
)
def test_well_formed_number_is_accepted(literal: bytes, value: float) -> None:
    """The negative twin: JSON's own number forms, exponents with signs included, decode."""
    assert decode_wake_message(_with_raw("kalshi_price", literal)).kalshi_price == value


@pytest.mark.parametrize("after", [b"x", b"{}", b",", b"]", b"}", b" 1", b"\x00", b"\n{}"])
def test_content_after_the_document_is_refused(after: bytes) -> None:
    """Anything but whitespace after the closing brace is a parse error."""
    _refused_wake(_wake_body() + after, None)


@pytest.mark.parametrize("whitespace", [b" ", b"\n", b"\r\n", b"\t", b" \t\r\n  "])
def test_surrounding_whitespace_is_accepted(whitespace: bytes) -> None:
    """JSON whitespace before or after the document is fine."""
    assert decode_wake_message(_wake_body() + whitespace).asset == "BTC"
    assert decode_wake_message(whitespace + _wake_body()).asset == "BTC"


def test_byte_order_mark_is_refused() -> None:
    """A UTF-8 BOM is not JSON whitespace, as orjson agrees (the reference refuses it too)."""
    _refused_wake(b"\xef\xbb\xbf" + _wake_body(), None)


# ---------------------------------------------------------------------------------------------
# Numbers that do not fit a double.

MAX_DOUBLE_AS_INT: Final = int(1.7976931348623157e308)
MAX_DOUBLE_HALF_ULP: Final = 2**970
"""Half the spacing of doubles at the top of the range: max + this rounds (to even) to infinity."""


@pytest.mark.parametrize(
    "literal",
    [
        pytest.param(b"1e400", id="1e400"),
        pytest.param(b"-1e400", id="-1e400"),
        pytest.param(b"1e309", id="1e309"),
        pytest.param(b"1.7976931348623159e308", id="just-over-max"),
        pytest.param(b"1" + b"0" * 400, id="400-digit-integer"),
        pytest.param(b"-1" + b"0" * 400, id="negative-400-digit-integer"),
        pytest.param(str(MAX_DOUBLE_AS_INT + MAX_DOUBLE_HALF_ULP).encode(), id="halfway-integer"),
    ],
)
def test_number_overflowing_a_double_is_refused_naming_the_field(literal: bytes) -> None:
    """A number that would become an infinity in a float field is refused, naming that field."""
    reason = _refused_wake(_with_raw("fee", literal), "fee")
    assert "out of range" in reason


def test_number_overflowing_a_double_in_price_ranges_is_refused() -> None:
    """An overflowing number inside a price_ranges entry is refused, naming price_ranges."""
    _refused_wake(_with_raw("price_ranges", b"[[0.0,1e400,0.01]]"), "price_ranges")


@pytest.mark.parametrize(
    "literal",
    [
        pytest.param(b"1.7976931348623157e308", id="max-double"),
        pytest.param(b"1.7976931348623158e308", id="rounds-down-to-max"),
        pytest.param(str(MAX_DOUBLE_AS_INT).encode(), id="max-double-as-integer"),
        pytest.param(
            str(MAX_DOUBLE_AS_INT + MAX_DOUBLE_HALF_ULP - 1).encode(), id="below-halfway-integer"
        ),
        pytest.param(b"1" + b"0" * 308, id="309-digit-integer"),
    ],
)
def test_largest_finite_numbers_are_accepted(literal: bytes) -> None:
    """The negative twin: numbers that round to the largest finite double decode to it exactly."""
    value = decode_wake_message(_with_raw("fee", literal)).fee
    assert value == float(literal.decode())
    assert math.isfinite(value)


@given(st.integers(min_value=-(10**320), max_value=10**320))
@settings(max_examples=300, deadline=None)
def test_integer_literal_in_a_float_field_rounds_like_python(integer: int) -> None:
    """Any integer literal in a float field decodes to float(n), or is refused if that overflows."""
    body = _with_raw("edge", str(integer).encode())
    try:
        expected = float(integer)
    except OverflowError:
        _refused_wake(body, "edge")
    else:
        decoded = decode_wake_message(body).edge
        assert type(decoded) is float
        assert decoded == expected


@pytest.mark.parametrize("literal", [b"1e-400", b"-1e-400", b"1e-330", b"2e-324"])
def test_float_underflowing_to_zero_decodes_as_zero(literal: bytes) -> None:
    """A float below the smallest subnormal decodes as orjson does it: zero (C++ port refuses)."""
    value = decode_wake_message(_with_raw("fee", literal)).fee
    assert value == 0.0
    assert value == orjson.loads(literal)


def test_smallest_subnormal_decodes_exactly() -> None:
    """The negative twin: 5e-324 is representable and is not flushed to zero."""
    assert decode_wake_message(_with_raw("fee", b"5e-324")).fee == 5e-324


# ---------------------------------------------------------------------------------------------
# Shape: the top level, required fields, unexpected keys.


@pytest.mark.parametrize(
    "top_level", [b"[]", b"[{}]", b'"text"', b"1", b"1.5", b"null", b"true", b"false"]
)
def test_top_level_that_is_not_an_object_is_refused(top_level: bytes) -> None:
    """A JSON document that is not an object is refused with no field named."""
    _refused_wake(top_level, None)


@pytest.mark.parametrize("missing", list(REQUIRED))
def test_missing_required_field_is_refused_naming_it(missing: str) -> None:
    """Each of the twelve v1 fields is required: leaving one out is refused, naming it."""
    values = {key: value for key, value in FULL.items() if key != missing}
    reason = _refused_wake(_json_object(values), missing)
    assert missing in reason


def test_duplicate_key_does_not_stand_in_for_a_missing_field() -> None:
    """A field given twice does not count towards another missing one."""
    values = {key: value for key, value in FULL.items() if key != "edge"}
    _refused_wake(_json_object(values)[:-1] + b',"fee":0.5}', "edge")


def test_empty_object_is_refused_naming_a_required_field() -> None:
    """An empty object lacks every required field; the reason names one of them."""
    with pytest.raises(DecodeError) as caught:
        decode_wake_message(b"{}")
    assert caught.value.field in REQUIRED
    _assert_reason_shape(caught.value)


@pytest.mark.parametrize("key", ["wat", "Asset", "asset ", "", "recv_ms"])
def test_unexpected_key_is_refused_naming_it(key: str) -> None:
    """A key that is not a field (even one differing only by case or a space) is refused."""
    reason = _refused_wake(_wake_body(**{key: 1}), key)
    assert f"`{key}`" in reason


def test_huge_unexpected_key_is_refused_with_bounded_reason_and_field() -> None:
    """A 60 KB unknown key is neither echoed whole in the reason nor in the field attribute."""
    key = "k" * 60_000
    with pytest.raises(DecodeError) as caught:
        decode_wake_message(_wake_body(**{key: 1}))
    _assert_reason_shape(caught.value)
    assert caught.value.field is not None
    assert caught.value.field.startswith("kkkk")
    assert len(caught.value.field) <= 64


@pytest.mark.parametrize(
    "breaker", ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"]
)
def test_unexpected_key_with_a_line_break_gives_a_one_line_reason(breaker: str) -> None:
    """Every character str.splitlines() breaks on is neutralised in the reason and the field."""
    key = f"evil{breaker}key"
    with pytest.raises(DecodeError) as caught:
        decode_wake_message(_wake_body(**{key: 1}))
    _assert_reason_shape(caught.value)
    assert caught.value.field is not None
    assert caught.value.field.splitlines() == [caught.value.field]


@pytest.mark.parametrize("breaker", ["\n", "\x85", "\u2028", "\u2029"])
def test_bad_direction_with_a_line_break_gives_a_one_line_reason(breaker: str) -> None:
    """A refused string value that is echoed in the reason cannot break it into lines."""
    _refused_wake(_wake_body(direction=f"y{breaker}es"), "direction")


@pytest.mark.parametrize(
    "key", ["x` - at `$.fee", "x - at `$.fee`", "Object missing required field `fee`"]
)
def test_unexpected_key_cannot_spoof_the_field_name(key: str) -> None:
    """An unknown key that imitates the decoder's own wording is still named as itself."""
    with pytest.raises(DecodeError) as caught:
        decode_wake_message(_wake_body(**{key: 1}))
    assert caught.value.field == key


@pytest.mark.parametrize("value", ["x - at `$.fee`", "x' - at `$.fee`", "` - at `$.fee`"])
def test_bad_value_cannot_spoof_the_field_name(value: str) -> None:
    """A refused direction that imitates the decoder's wording still names direction."""
    _refused_wake(_wake_body(direction=value), "direction")


def test_huge_wrong_typed_string_value_is_not_echoed() -> None:
    """A 60 KB string in an int field gives a bounded reason naming the field."""
    _refused_wake(_wake_body(sent_at_ns="z" * 60_000), "sent_at_ns")


def test_huge_bad_direction_is_not_echoed() -> None:
    """A 60 KB direction (the decoder quotes bad enum values) still gives a bounded reason."""
    _refused_wake(_wake_body(direction="y" * 60_000), "direction")


# ---------------------------------------------------------------------------------------------
# Wrong JSON types, field by field.

STRING = b'"1"'
WRONG_FOR_INT: Final = [STRING, b"1.5", b"1.0", b"1e3", b"-0.0", b"true", b"false", b"null"]
WRONG_FOR_FLOAT: Final = [STRING, b'"NaN"', b"true", b"false", b"null", b"[]", b"{}"]
WRONG_FOR_STR: Final = [b"1", b"1.5", b"true", b"false", b"null", b"[]", b"{}", b'["a"]']
WRONG_FOR_BOOL: Final = [b"0", b"1", b'"true"', b'"false"', b"null", b"1.0", b"[]", b"{}"]
WRONG_FOR_DIRECTION: Final = [
    b'"YES"',
    b'"Yes"',
    b'"NO"',
    b'"y"',
    b'"n"',
    b'""',
    b'" yes"',
    b'"yes "',
    b'"true"',
    b"1",
    b"true",
    b"null",
    b'["yes"]',
]
WRONG_FOR_PRICE_RANGES: Final = [
    b"{}",
    b"null",
    b'"[[0.0,1.0,0.01]]"',
    b"1.0",
    b"true",
    b"[1.0]",
    b"[[]]",
    b"[[0.0,1.0]]",
    b"[[0.0,1.0,0.01,0.02]]",
    b"[[0.0,1.0,0.01],[0.0,1.0]]",
    b'[[0.0,"1.0",0.01]]',
    b"[[0.0,true,0.01]]",
    b"[[0.0,null,0.01]]",
    b"[[0.0,[1.0],0.01]]",
    b'[{"start":0.0}]',
    b"[null]",
]


def _wrong_type_cases() -> list[Any]:
    cases: list[Any] = []
    table = [
        (INT_FIELDS, WRONG_FOR_INT),
        (FLOAT_FIELDS, WRONG_FOR_FLOAT),
        (STR_FIELDS, WRONG_FOR_STR),
        (("dry_run",), WRONG_FOR_BOOL),
        (("direction",), WRONG_FOR_DIRECTION),
        (("price_ranges",), WRONG_FOR_PRICE_RANGES),
    ]
    for fields, wrong_values in table:
        for field in fields:
            for raw in wrong_values:
                cases.append(pytest.param(field, raw, id=f"{field}={raw.decode()}"))
    return cases


def test_wrong_type_table_covers_every_field() -> None:
    """The table below reaches all twenty fields (so a new field cannot go untested)."""
    assert {case.values[0] for case in _wrong_type_cases()} == set(WAKE_FIELDS)


@pytest.mark.parametrize(("field", "raw"), _wrong_type_cases())
def test_wrong_json_type_is_refused_naming_the_field(field: str, raw: bytes) -> None:
    """A value of the wrong JSON type (or a bad literal) is refused, naming its field."""
    reason = _refused_wake(_with_raw(field, raw), field)
    assert field in reason


@pytest.mark.parametrize(
    ("field", "raw", "expected"),
    [
        ("dry_run", b"true", True),
        ("dry_run", b"false", False),
        ("direction", b'"yes"', "yes"),
        ("direction", b'"no"', "no"),
        ("price_ranges", b"[]", []),
        ("price_ranges", b"[[0,1,1]]", [[0.0, 1.0, 1.0]]),
        ("exchange_index", b"-0", 0),
        ("asset", b'""', ""),
    ],
)
def test_right_json_type_is_accepted(field: str, raw: bytes, expected: object) -> None:
    """The negative twin of the table: the accepted literal of each kind decodes."""
    assert getattr(decode_wake_message(_with_raw(field, raw)), field) == expected


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize(
    "value", [2**63, -(2**63) - 1, 2**64, -(2**64), 10**30], ids=lambda v: f"{v}"
)
def test_integer_outside_int64_is_refused(field: str, value: int) -> None:
    """Every int field is bounded to signed 64 bits."""
    _refused_wake(_with_raw(field, str(value).encode()), field)


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("value", [INT64_MAX, INT64_MIN, 0, -1], ids=lambda v: f"{v}")
def test_integer_at_the_int64_bounds_is_accepted(field: str, value: int) -> None:
    """The negative twin: the int64 extremes themselves decode exactly, as ints."""
    decoded = getattr(decode_wake_message(_with_raw(field, str(value).encode())), field)
    assert decoded == value
    assert type(decoded) is int


# ---------------------------------------------------------------------------------------------
# What is accepted.


def test_duplicate_key_last_one_wins() -> None:
    """When a key repeats, the last value is the one kept (orjson's behaviour)."""
    body = _wake_body()[:-1] + b',"asset":"ETH","dry_run":false,"asset":"SOL"}'
    message = decode_wake_message(body)
    assert message.asset == "SOL"
    assert message.dry_run is False


def test_negative_zero_keeps_its_sign() -> None:
    """``-0.0`` decodes with its sign bit set and re-encodes as ``-0.0``."""
    message = decode_wake_message(_with_raw("edge", b"-0.0"))
    assert math.copysign(1.0, message.edge) == -1.0
    assert b'"edge":-0.0,' in encode_frame(message)


def test_positive_zero_has_no_sign() -> None:
    """The negative twin: ``0.0`` decodes with a clear sign bit."""
    message = decode_wake_message(_with_raw("edge", b"0.0"))
    assert math.copysign(1.0, message.edge) == 1.0


@pytest.mark.parametrize("field", FLOAT_FIELDS)
def test_integer_literal_in_a_float_field_is_stored_as_float(field: str) -> None:
    """``1`` in a float field becomes ``1.0`` (a float), and re-encoding writes ``1.0``."""
    message = decode_wake_message(_with_raw(field, b"1"))
    value = getattr(message, field)
    assert type(value) is float
    assert value == 1.0
    assert f'"{field}":1.0'.encode() in encode_frame(message)


def test_integer_literals_in_price_ranges_are_stored_as_floats() -> None:
    """Integer literals inside price_ranges entries become floats too."""
    message = decode_wake_message(_with_raw("price_ranges", b"[[0,1,1]]"))
    assert [type(x) for x in message.price_ranges[0]] == [float, float, float]
    assert b'"price_ranges":[[0.0,1.0,1.0]]' in encode_frame(message)


@pytest.mark.parametrize("version", [0, -5, 1, 4, 5, 999, INT64_MAX, INT64_MIN])
def test_any_int_schema_version_is_accepted(version: int) -> None:
    """The decoder never looks at schema_version beyond its type."""
    assert decode_wake_message(_wake_body(schema_version=version)).schema_version == version


def test_price_ranges_entry_of_three_numbers_is_accepted() -> None:
    """Several three-number entries decode to lists of floats in order."""
    message = decode_wake_message(_wake_body())
    assert message.price_ranges == FULL["price_ranges"]


# ---------------------------------------------------------------------------------------------
# Legacy bodies and defaults.

V4_DEFAULTS: Final[dict[str, Any]] = {
    "recv_ns": 0,
    "clock_domain": "",
    "dry_run": False,
    "wire_price_yes_dollars": 0.0,
    "exchange_index": -1,
    "available_size_contracts": 0.0,
    "price_ranges": [[0.0, 1.0, 0.01]],
    "correlation_group": "",
}


def _legacy(version: int) -> dict[str, Any]:
    """The legacy dict bodies PROTOCOL.md describes (new keys appended, old keys in place)."""
    body: dict[str, Any] = {
        "schema_version": 1,
        "correlation_id": "corr-v1",
        "market_ticker": "KXBTCD-T100",
        "asset": "BTC",
        "direction": "yes",
        "kalshi_price": 0.56,
        "model_probability": 0.62,
        "fee": 0.02,
        "edge": 0.06,
        "decision_ts_ms": 1000,
        "sent_at_ms": 1001,
        "sent_at_ns": 1001000000,
    }
    if version >= 2:
        body.update(schema_version=2, correlation_id="corr-v2")
        body.update(recv_ns=5000000000, clock_domain="host-a:1787290000", dry_run=False)
    if version >= 3:
        body.update(schema_version=3, correlation_id="corr-v3")
        body.update(
            wire_price_yes_dollars=0.56,
            exchange_index=2,
            available_size_contracts=0.0,
            price_ranges=[[0.0, 1.0, 0.01]],
        )
    return body


@pytest.mark.parametrize("version", [1, 2, 3])
def test_legacy_body_gets_v4_defaults(version: int) -> None:
    """A v1/v2/v3 body decodes with its own values and the v4 default for every field it lacks."""
    legacy = _legacy(version)
    message = decode_wake_message(orjson.dumps(legacy))
    assert dataclasses.asdict(message) == {**V4_DEFAULTS, **legacy}
    assert message.schema_version == version


def test_v1_body_defaults_match_the_constructor() -> None:
    """A decoded v1 body equals the dataclass built from the same twelve values."""
    assert decode_wake_message(orjson.dumps(REQUIRED)) == WakeMessage(**REQUIRED)


def test_default_price_ranges_are_fresh_per_decoded_message() -> None:
    """Mutating one decoded message's default price_ranges leaves the next one's untouched."""
    first = decode_wake_message(orjson.dumps(REQUIRED))
    second = decode_wake_message(orjson.dumps(REQUIRED))
    assert first.price_ranges is not second.price_ranges
    first.price_ranges.append([0.5, 0.6, 0.05])
    first.price_ranges[0][2] = 0.5
    assert second.price_ranges == [[0.0, 1.0, 0.01]]
    assert decode_wake_message(orjson.dumps(REQUIRED)).price_ranges == [[0.0, 1.0, 0.01]]
    assert default_price_ranges() == [[0.0, 1.0, 0.01]]


def test_default_price_ranges_are_fresh_per_constructed_message() -> None:
    """Mutating one constructed message's default price_ranges leaves another's untouched."""
    first = WakeMessage(**REQUIRED)
    second = WakeMessage(**REQUIRED)
    first.price_ranges[0][0] = 0.9
    assert second.price_ranges == [[0.0, 1.0, 0.01]]


# ---------------------------------------------------------------------------------------------
# Acks.


def test_accepted_ack_decodes() -> None:
    """An accepted ack with a null reason decodes to the same WakeAck."""
    assert decode_wake_ack(orjson.dumps(ACK)) == WakeAck(**ACK)


def test_rejected_ack_with_reason_decodes() -> None:
    """A rejected ack's string reason is kept."""
    body = orjson.dumps({**ACK, "correlation_id": "", "status": "rejected", "reason": "bad"})
    ack = decode_wake_ack(body)
    assert (ack.status, ack.reason, ack.correlation_id) == ("rejected", "bad", "")


def test_ack_without_reason_gets_null() -> None:
    """reason defaults to None when the key is absent."""
    body = orjson.dumps({key: value for key, value in ACK.items() if key != "reason"})
    assert decode_wake_ack(body).reason is None


@pytest.mark.parametrize("status", [b'"ok"', b'"ACCEPTED"', b'"Accepted"', b'""', b"1", b"null"])
def test_ack_status_other_than_accepted_or_rejected_is_refused(status: bytes) -> None:
    """An ack status must be exactly "accepted" or "rejected"."""
    _refused_ack(_json_object(ACK, {"status": status}), "status")


@pytest.mark.parametrize("reason", [b"1", b"1.5", b"true", b"[]", b"{}", b'["x"]'])
def test_ack_reason_of_wrong_type_is_refused(reason: bytes) -> None:
    """An ack reason is a string or null, nothing else."""
    _refused_ack(_json_object(ACK, {"reason": reason}), "reason")


@pytest.mark.parametrize(
    "missing", ["schema_version", "correlation_id", "received_at_ms", "status"]
)
def test_ack_missing_required_field_is_refused(missing: str) -> None:
    """Each required ack field is required."""
    values = {key: value for key, value in ACK.items() if key != missing}
    _refused_ack(_json_object(values), missing)


@pytest.mark.parametrize("field", ["schema_version", "received_at_ms"])
def test_ack_int_fields_are_int64(field: str) -> None:
    """The ack's int fields refuse values outside int64 and bools, and accept the bounds."""
    for bad in (b"9223372036854775808", b"-9223372036854775809", b"true", b"1.5", b'"1"'):
        _refused_ack(_json_object(ACK, {field: bad}), field)
    for good in (INT64_MAX, INT64_MIN):
        assert getattr(decode_wake_ack(orjson.dumps({**ACK, field: good})), field) == good


def test_ack_unexpected_key_and_non_object_are_refused() -> None:
    """The ack decoder is as strict as the message decoder about shape."""
    _refused_ack(orjson.dumps({**ACK, "wat": 1}), "wat")
    _refused_ack(b"[]", None)
    _refused_ack(b"", None)


# ---------------------------------------------------------------------------------------------
# Framing.


def test_frame_length_at_the_cap_is_accepted() -> None:
    """Exactly 65536 bytes is legal."""
    assert MAX_FRAME_BYTES == 65536
    assert parse_frame_length((65536).to_bytes(4, "big")) == 65536


def test_frame_length_over_the_cap_is_refused() -> None:
    """65537 is refused with FrameTooLargeError, a ValueError carrying the declared length."""
    with pytest.raises(FrameTooLargeError) as caught:
        parse_frame_length((65537).to_bytes(4, "big"))
    assert isinstance(caught.value, ValueError)
    assert caught.value.declared == 65537


def test_largest_frame_length_is_refused() -> None:
    """0xFFFFFFFF is read unsigned, so it is over the cap (not -1)."""
    with pytest.raises(FrameTooLargeError) as caught:
        parse_frame_length(b"\xff\xff\xff\xff")
    assert caught.value.declared == 0xFFFFFFFF


def test_zero_frame_length_is_accepted() -> None:
    """A zero length is legal framing (its empty body is what fails to decode)."""
    assert parse_frame_length(b"\x00\x00\x00\x00") == 0


def test_frame_length_is_big_endian() -> None:
    """The prefix is big-endian: 00 00 01 00 is 256, and 00 01 00 00 is 65536."""
    assert parse_frame_length(b"\x00\x00\x01\x00") == 256
    assert parse_frame_length(b"\x00\x01\x00\x00") == 65536


@pytest.mark.parametrize("size", [0, 1, 3, 5, 8])
def test_prefix_of_wrong_size_is_refused(size: int) -> None:
    """Only a 4-byte prefix is parsed; any other size is a ValueError, not a frame-size error."""
    with pytest.raises(ValueError, match="4 bytes") as caught:
        parse_frame_length(b"\x00" * size)
    assert not isinstance(caught.value, FrameTooLargeError)


def test_encode_frame_does_not_enforce_the_cap() -> None:
    """The encoder writes an oversized frame; only the reader's parse_frame_length refuses it."""
    frame = encode_frame(WakeMessage(**{**REQUIRED, "asset": "A" * (MAX_FRAME_BYTES + 1)}))
    declared = int.from_bytes(frame[:4], "big")
    assert declared == len(frame) - 4 > MAX_FRAME_BYTES
    with pytest.raises(FrameTooLargeError):
        parse_frame_length(frame[:4])


def test_encode_frame_writes_orjson_with_a_prefix() -> None:
    """A frame is the 4-byte big-endian body length then exactly orjson's bytes."""
    message = WakeMessage(**FULL)
    body = orjson.dumps(message)
    assert encode_frame(message) == struct.pack(">I", len(body)) + body
    assert list(orjson.loads(body)) == list(WAKE_FIELDS)


# ---------------------------------------------------------------------------------------------
# The hand-built ack encoders.

int64s = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)


@given(correlation_id=st.text(), received_at_ms=int64s)
@settings(max_examples=400, deadline=None)
def test_encode_accepted_ack_matches_encode_frame(correlation_id: str, received_at_ms: int) -> None:
    """The hand-built accepted ack is byte-identical to orjson's frame of the same WakeAck."""
    expected = encode_frame(
        WakeAck(SCHEMA_VERSION, correlation_id, received_at_ms, "accepted", None)
    )
    frame = encode_accepted_ack(correlation_id, received_at_ms)
    assert frame == expected
    assert decode_wake_ack(frame[4:]).correlation_id == correlation_id


@given(reason=st.text(), received_at_ms=int64s)
@settings(max_examples=200, deadline=None)
def test_encode_rejected_ack_matches_encode_frame(reason: str, received_at_ms: int) -> None:
    """The rejected ack is orjson's frame of WakeAck(4, "", ms, "rejected", reason)."""
    expected = encode_frame(WakeAck(SCHEMA_VERSION, "", received_at_ms, "rejected", reason))
    frame = encode_rejected_ack(reason, received_at_ms)
    assert frame == expected
    assert decode_wake_ack(frame[4:]) == WakeAck(4, "", received_at_ms, "rejected", reason)


@pytest.mark.parametrize(
    "correlation_id", ["", 'quote:" backslash:\\ tab:\t newline:\n', "\x00\x1f\x7f", "🚀中文\u2028"]
)
def test_encode_accepted_ack_escapes_like_orjson(correlation_id: str) -> None:
    """Escapes, control and astral characters come out exactly as orjson writes them."""
    frame = encode_accepted_ack(correlation_id, 1787289600125)
    assert frame == encode_frame(WakeAck(4, correlation_id, 1787289600125, "accepted", None))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


# ---------------------------------------------------------------------------------------------
# Clock comparability.


@pytest.mark.parametrize(
    ("recv_ns", "message_domain", "local_domain", "comparable"),
    [
        (5, "host:60", "host:60", True),
        (1, "h:0", "h:0", True),
        (0, "host:60", "host:60", False),
        (-1, "host:60", "host:60", False),
        (5, "", "", False),
        (0, "", "", False),
        (5, "host:60", "host:120", False),
        (5, "host:60", "", False),
        (5, "", "host:60", False),
        (5, "Host:60", "host:60", False),
    ],
)
def test_is_clock_comparable_to(
    recv_ns: int, message_domain: str, local_domain: str, comparable: bool
) -> None:
    """Comparable only for a stamped recv_ns and equal, non-empty domains."""
    message = WakeMessage(**{**REQUIRED, "recv_ns": recv_ns, "clock_domain": message_domain})
    assert message.is_clock_comparable_to(local_domain) is comparable


# ---------------------------------------------------------------------------------------------
# Properties.

finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]),
    st.sampled_from([1e16, 1e-6, 1e-5, 9.999999999999999e15, 0.1 + 0.2, 1 / 3, 1e21]),
)
messages = st.builds(
    WakeMessage,
    schema_version=int64s,
    correlation_id=st.text(),
    market_ticker=st.text(),
    asset=st.text(),
    direction=st.sampled_from(["yes", "no"]),
    kalshi_price=finite_floats,
    model_probability=finite_floats,
    fee=finite_floats,
    edge=finite_floats,
    decision_ts_ms=int64s,
    sent_at_ms=int64s,
    sent_at_ns=int64s,
    recv_ns=int64s,
    clock_domain=st.text(),
    dry_run=st.booleans(),
    wire_price_yes_dollars=finite_floats,
    exchange_index=int64s,
    available_size_contracts=finite_floats,
    price_ranges=st.lists(st.lists(finite_floats, min_size=3, max_size=3), max_size=4),
    correlation_group=st.text(),
)


@given(messages)
@settings(max_examples=600, deadline=None)
def test_any_valid_message_round_trips(message: WakeMessage) -> None:
    """decode(encode(m)) == m, and re-encoding gives the same bytes (which catches -0.0 too)."""
    frame = encode_frame(message)
    decoded = decode_wake_message(frame[4:])
    assert decoded == message
    assert encode_frame(decoded) == frame
    for field in FLOAT_FIELDS:
        assert type(getattr(decoded, field)) is float


def _assert_decodes_or_refuses(body: bytes) -> None:
    """The one contract for arbitrary input: a message, or a well-formed DecodeError."""
    try:
        message = decode_wake_message(body)
    except DecodeError as error:
        _assert_reason_shape(error)
        assert error.field is None or len(error.field) <= 64
    else:
        assert decode_wake_message(encode_frame(message)[4:]) == message
    try:
        decode_wake_ack(body)
    except DecodeError as error:
        _assert_reason_shape(error)


@given(st.binary(max_size=512))
@settings(max_examples=1500, deadline=None)
def test_any_bytes_decode_or_raise_decode_error(body: bytes) -> None:
    """Arbitrary bytes never raise anything but DecodeError."""
    _assert_decodes_or_refuses(body)


@st.composite
def mutated_bodies(draw: st.DrawFn) -> bytes:
    """A valid body with a few byte flips, truncations, insertions or deletions."""
    body = bytearray(orjson.dumps(draw(messages)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "replace"]))
        at = draw(st.integers(min_value=0, max_value=max(len(body) - 1, 0)))
        if kind == "flip" and body:
            body[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif kind == "truncate":
            del body[at:]
        elif kind == "insert":
            body[at:at] = draw(
                st.one_of(
                    st.binary(min_size=1, max_size=8),
                    st.sampled_from([b",", b":", b'"', b"\\", b"{", b"}", b"[", b"]", b"\\u"]),
                    st.sampled_from([b"1e400", b"NaN", b"true", b"null", b'"x":1,', b"\xed\xa0"]),
                )
            )
        elif kind == "delete" and body:
            del body[at : at + draw(st.integers(min_value=1, max_value=8))]
        elif kind == "replace" and body:
            body[at] = draw(st.sampled_from(b'",:{}[]\\0123456789-+.eE tfn\x00\x80\xff'))
    return bytes(body)


@given(mutated_bodies())
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_valid_body_decodes_or_raises_decode_error(body: bytes) -> None:
    """A corrupted valid body never raises anything but DecodeError."""
    _assert_decodes_or_refuses(body)


json_strings = st.text(max_size=20).map(orjson.dumps)
json_ints = int64s.map(orjson.dumps)
json_fractions = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: not x.is_integer()
)
json_floats = st.one_of(json_fractions, st.sampled_from([1.0, -0.0, 1e16])).map(orjson.dumps)
json_bools = st.booleans().map(orjson.dumps)
json_nulls = st.just(b"null")
json_arrays = st.lists(st.integers(-5, 5), max_size=3).map(orjson.dumps)
json_objects = st.dictionaries(st.text(max_size=5), st.integers(-5, 5), max_size=2).map(
    orjson.dumps
)

json_not_yes_or_no = json_strings.filter(lambda raw: raw not in (b'"yes"', b'"no"'))
WRONG_JSON: Final[dict[str, st.SearchStrategy[bytes]]] = {
    **dict.fromkeys(
        INT_FIELDS,
        st.one_of(json_strings, json_floats, json_bools, json_nulls, json_arrays, json_objects),
    ),
    **dict.fromkeys(
        FLOAT_FIELDS, st.one_of(json_strings, json_bools, json_nulls, json_arrays, json_objects)
    ),
    **dict.fromkeys(
        STR_FIELDS,
        st.one_of(json_ints, json_floats, json_bools, json_nulls, json_arrays, json_objects),
    ),
    "direction": st.one_of(
        json_not_yes_or_no, json_ints, json_floats, json_bools, json_nulls, json_objects
    ),
    "dry_run": st.one_of(
        json_ints, json_floats, json_strings, json_nulls, json_arrays, json_objects
    ),
    "price_ranges": st.one_of(
        json_ints, json_floats, json_strings, json_bools, json_nulls, json_objects
    ),
}
"""For each field, JSON values of a type it must refuse (direction: also strings not yes/no)."""


def test_wrong_json_strategies_cover_every_field() -> None:
    """The property below can pick any of the twenty fields."""
    assert set(WRONG_JSON) == set(WAKE_FIELDS)


@given(messages, st.data())
@settings(max_examples=800, deadline=None)
def test_one_wrong_typed_field_is_refused_naming_it(
    message: WakeMessage, data: st.DataObject
) -> None:
    """Any valid message with one field's value swapped for a wrong-typed one names that field."""
    field = data.draw(st.sampled_from(WAKE_FIELDS))
    raw = data.draw(WRONG_JSON[field])
    _refused_wake(_json_object(dataclasses.asdict(message), {field: raw}), field)
