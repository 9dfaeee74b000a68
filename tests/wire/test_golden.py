"""The committed golden fixtures hold against the project's own code (PROTOCOL.md, "Golden").

Frames are rebuilt from the generator's case definitions (``golden/generate.py``, imported by path)
and compared byte for byte; the TSV files are checked line by line against the codec, snap and
percentile, each with a negative twin proving the file can tell a plausible wrong implementation
apart. ``tests/wire/test_conformance.py`` holds the same files to the reference's output.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import math
import struct
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from bench.reports.stats import percentile
from executor.decide.prices import snap_to_grid
from executor.signer import signing_message
from executor.wire.protocol import (
    PREFIX_BYTES,
    WakeAck,
    WakeMessage,
    decode_wake_ack,
    decode_wake_message,
    encode_frame,
    parse_frame_length,
)

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden_generate", GOLDEN / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


generate = _load_generator()
FRAME_CASES: dict[str, object] = generate.frame_cases()
WAKE_NAMES = sorted(name for name in FRAME_CASES if name.startswith("wake_"))
ACK_NAMES = sorted(name for name in FRAME_CASES if name.startswith("ack_"))
LEGACY_NAMES = sorted(name for name in FRAME_CASES if name.startswith("legacy_"))


def bits_of(value: float) -> str:
    (bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return f"{bits:016x}"


def value_of(bits: str) -> float:
    (value,) = struct.unpack("<d", struct.pack("<Q", int(bits, 16)))
    return float(value)


def frame_body(name: str) -> bytes:
    frame = (GOLDEN / "frames" / f"{name}.frame").read_bytes()
    assert parse_frame_length(frame[:PREFIX_BYTES]) == len(frame) - PREFIX_BYTES
    return frame[PREFIX_BYTES:]


def tsv_rows(name: str) -> list[list[str]]:
    text = (GOLDEN / name).read_text(encoding="ascii")
    assert text.endswith("\n") and "\r" not in text
    return [line.split("\t") for line in text.splitlines()]


# --- frames -----------------------------------------------------------------------------------


def test_frame_files_are_exactly_the_ten_cases() -> None:
    """golden/frames holds one file per specified frame and nothing else."""
    on_disk = sorted(path.stem for path in (GOLDEN / "frames").glob("*"))
    assert on_disk == sorted(FRAME_CASES)
    assert len(on_disk) == 10


@pytest.mark.parametrize("name", sorted(FRAME_CASES))
def test_frame_encodes_to_its_file(name: str) -> None:
    """Each case encodes to its committed file byte for byte, length prefix included."""
    assert encode_frame(FRAME_CASES[name]) == (GOLDEN / "frames" / f"{name}.frame").read_bytes()


@pytest.mark.parametrize("name", WAKE_NAMES)
def test_wake_frame_round_trips(name: str) -> None:
    """Each wake frame decodes to its case and re-encodes to the same bytes."""
    body = frame_body(name)
    message = decode_wake_message(body)
    assert message == FRAME_CASES[name]
    assert encode_frame(message)[PREFIX_BYTES:] == body


@pytest.mark.parametrize("name", ACK_NAMES)
def test_ack_frame_round_trips(name: str) -> None:
    """Each ack frame decodes to its case and re-encodes to the same bytes."""
    body = frame_body(name)
    ack = decode_wake_ack(body)
    assert ack == FRAME_CASES[name]
    assert encode_frame(ack)[PREFIX_BYTES:] == body


def _v4_defaults() -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(WakeMessage):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return defaults


@pytest.mark.parametrize(
    ("name", "missing_count"), [("legacy_v1", 8), ("legacy_v2", 5), ("legacy_v3", 1)]
)
def test_legacy_frame_gets_v4_defaults(name: str, missing_count: int) -> None:
    """A v1-v3 body decodes with its own values and the v4 default for every field it lacks."""
    body = frame_body(name)
    raw = orjson.loads(body)
    defaults = _v4_defaults()
    missing = [field for field in defaults if field not in raw]
    assert len(missing) == missing_count
    message = decode_wake_message(body)
    for field in dataclasses.fields(WakeMessage):
        expected = raw[field.name] if field.name in raw else defaults[field.name]
        assert getattr(message, field.name) == expected, field.name
    assert message.price_ranges == [[0.0, 1.0, 0.01]]


def test_legacy_default_price_ranges_are_fresh_per_message() -> None:
    """Two messages decoded without price_ranges do not share one default list."""
    body = frame_body("legacy_v1")
    first, second = decode_wake_message(body), decode_wake_message(body)
    assert first.price_ranges == second.price_ranges
    assert first.price_ranges is not second.price_ranges


def test_generator_cases_are_typed_as_specified() -> None:
    """Wake and ack cases are the dataclasses; legacy cases are raw dicts, as the spec says."""
    assert all(isinstance(FRAME_CASES[name], WakeMessage) for name in WAKE_NAMES)
    assert all(isinstance(FRAME_CASES[name], WakeAck) for name in ACK_NAMES)
    assert all(type(FRAME_CASES[name]) is dict for name in LEGACY_NAMES)


# --- doubles ----------------------------------------------------------------------------------


def test_doubles_encode_and_parse_back_bit_for_bit() -> None:
    """Every double encodes to its string with orjson, and the string parses back to its bits."""
    rows = tsv_rows("doubles.tsv")
    assert len(rows) == 1000
    for bits, text in rows:
        assert orjson.dumps(value_of(bits)).decode() == text, bits
        assert bits_of(orjson.loads(text)) == bits, text


def test_doubles_file_tells_other_float_formatting_apart() -> None:
    """Python's repr differs from orjson on some lines: the file pins orjson's exact text."""
    rows = tsv_rows("doubles.tsv")
    assert any(repr(value_of(bits)) != text for bits, text in rows)


def test_doubles_file_is_what_the_generator_writes() -> None:
    """The committed doubles are the specified curated list and seeded draws."""
    assert (GOLDEN / "doubles.tsv").read_text() == generate.render_doubles()


# --- snap_to_grid -----------------------------------------------------------------------------

SnapFunction = Callable[[float, Sequence[Sequence[float]]], float]
ONE_CENT = 0.01  # snap_to_grid's fallback grid when no range covers the price (SERVICE.md)


def _snap_rows() -> list[tuple[float, list[list[float]], str]]:
    cases = []
    for price_bits, ranges_text, result_bits in tsv_rows("snap_to_grid.tsv"):
        triples = ranges_text.split(";") if ranges_text else []
        ranges = [[value_of(bits) for bits in triple.split(":")] for triple in triples]
        assert all(len(triple) == 3 for triple in ranges)
        cases.append((value_of(price_bits), ranges, result_bits))
    return cases


def _snap_mismatches(snap: SnapFunction) -> list[float]:
    return [
        price for price, ranges, result in _snap_rows() if bits_of(snap(price, ranges)) != result
    ]


def _round_half_away(quotient: float) -> int:
    return math.floor(quotient + 0.5) if quotient >= 0 else math.ceil(quotient - 0.5)


def _snap_half_away(price: float, ranges: Sequence[Sequence[float]]) -> float:
    """snap_to_grid with the rounding changed to half away from zero, and nothing else."""
    for start, end, step in ranges:
        if step > 0 and start <= price <= end:
            return _round_half_away(price / step) * step
    return _round_half_away(price / ONE_CENT) * ONE_CENT


def test_snap_file_holds_bit_for_bit() -> None:
    """snap_to_grid gives the committed result bits for all 424 cases."""
    assert len(_snap_rows()) == 424
    assert _snap_mismatches(snap_to_grid) == []


def test_snap_file_refuses_half_away_from_zero() -> None:
    """Rounding ties away from zero instead of to even fails some committed cases."""
    mismatches = _snap_mismatches(_snap_half_away)
    assert 0.25 in mismatches
    assert len(mismatches) < 424  # the variant differs on ties only, not everywhere


def test_snap_file_is_what_the_generator_writes() -> None:
    """The committed snap cases are the specified ties, edges and seeded samples."""
    assert (GOLDEN / "snap_to_grid.tsv").read_text() == generate.render_snap()


# --- percentiles ------------------------------------------------------------------------------

PercentileFunction = Callable[[Sequence[float], float], float]


def _percentile_blocks() -> list[tuple[str, list[float], list[tuple[float, str]]]]:
    blocks: list[tuple[str, list[float], list[tuple[float, str]]]] = []
    rows = tsv_rows("percentiles.tsv")
    index = 0
    while index < len(rows):
        tag, name, count = rows[index]
        assert tag == "vector"
        n = int(count)
        values = [value_of(row[0]) for row in rows[index + 1 : index + 1 + n]]
        index += 1 + n
        ranks: list[tuple[float, str]] = []
        while index < len(rows) and rows[index][0] == "p":
            _, p_bits, result_bits = rows[index]
            ranks.append((value_of(p_bits), result_bits))
            index += 1
        blocks.append((name, values, ranks))
    return blocks


def _percentile_mismatches(estimator: PercentileFunction) -> list[tuple[str, float]]:
    return [
        (name, p)
        for name, values, ranks in _percentile_blocks()
        for p, result in ranks
        if bits_of(estimator(values, p)) != result
    ]


def _nearest_rank(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def test_percentile_file_holds_bit_for_bit() -> None:
    """percentile gives the committed bits for every rank of all seven vectors."""
    blocks = _percentile_blocks()
    assert [name for name, _, _ in blocks] == [
        "single",
        "pair",
        "triple",
        "unsorted",
        "ties",
        "wide",
        "n2000",
    ]
    assert all(len(ranks) == 5 for _, _, ranks in blocks)
    assert _percentile_mismatches(percentile) == []


def test_percentile_file_refuses_nearest_rank() -> None:
    """A nearest-rank estimator fails the committed percentile file."""
    assert _percentile_mismatches(_nearest_rank) != []


def test_percentile_file_is_what_the_generator_writes() -> None:
    """The committed vectors are the specified ones, n2000 drawn from the specified seed."""
    assert (GOLDEN / "percentiles.tsv").read_text() == generate.render_percentiles()


# --- signing ----------------------------------------------------------------------------------

SALT_32 = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)


def _golden_public_key() -> rsa.RSAPublicKey:
    key = serialization.load_pem_public_key((GOLDEN / "signing" / "public_key.pem").read_bytes())
    assert isinstance(key, rsa.RSAPublicKey)
    assert key.key_size == 2048
    return key


def _verifies(key: rsa.RSAPublicKey, signature_b64: str, message: bytes) -> bool:
    try:
        key.verify(
            base64.b64decode(signature_b64, validate=True), message, SALT_32, hashes.SHA256()
        )
    except InvalidSignature:
        return False
    return True


def test_own_signatures_verify_with_the_committed_public_key() -> None:
    """The five committed signatures verify over the messages signing_message builds."""
    rows = tsv_rows("signing/vectors.tsv")
    assert [tuple(row[:3]) for row in rows] == list(generate.SIGNING_ROWS)
    key = _golden_public_key()
    for timestamp, method, path, signature in rows:
        assert _verifies(key, signature, signing_message(timestamp, method, path)), path


def test_own_signatures_do_not_verify_for_other_messages() -> None:
    """Each committed signature fails for the next row's message (the check is not vacuous)."""
    rows = tsv_rows("signing/vectors.tsv")
    key = _golden_public_key()
    for row, other in zip(rows, rows[1:] + rows[:1], strict=True):
        assert not _verifies(key, row[3], signing_message(*other[:3]))


def test_no_private_key_is_committed() -> None:
    """No file under golden/ holds private key material."""
    for path in GOLDEN.rglob("*"):
        if path.is_file():
            assert b"PRIVATE KEY-----" not in path.read_bytes(), path
