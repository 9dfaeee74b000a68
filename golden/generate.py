"""Write every golden fixture from the values in the specification, with the project's own code.

    .venv/bin/python golden/generate.py

Run it by hand when a case is added or changed, review the diff, and commit the outputs; CI never
runs it. Everything but ``signing/`` and ``SOURCE.txt`` is deterministic and must come out byte for
byte as committed (``tests/wire/test_golden.py`` holds the committed files to these functions,
and ``tests/wire/test_conformance.py`` holds them to the reference's output, that of
anaborne/prediction-market-infra, when given a copy of it). ``signing/`` is new on every
run: PSS salts randomly and the throwaway private key is discarded; only its public half is kept.

The case definitions live in functions so that the tests can import this file by path and rebuild
the same cases without writing anything.
"""

from __future__ import annotations

import base64
import datetime
import math
import platform
import random
import struct
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import cryptography
import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from bench.reports.stats import percentile
from executor.decide.prices import snap_to_grid
from executor.signer import KalshiSigner
from executor.wire.protocol import WakeAck, WakeMessage, encode_frame

GOLDEN = Path(__file__).resolve().parent

DOUBLES_COUNT = 1000
DOUBLES_SEED = 20260829
SNAP_SEED = 20260830
SNAP_SAMPLES = 400
PERCENTILE_SEED = 20260831
PERCENTILE_DRAWS = 2000
PERCENTILE_RANKS = (0.0, 0.5, 0.9, 0.99, 1.0)

CENT = [[0.0, 1.0, 0.01]]
LADDER = [[0.0, 0.05, 0.001], [0.05, 0.95, 0.01], [0.95, 1.0, 0.001]]

# The (timestamp, method, path) rows of the reference's signing vectors, so the two fixtures sign
# the same messages.
SIGNING_ROWS = (
    ("1703123456789", "GET", "/trade-api/v2/portfolio/orders"),
    ("1703123456789", "POST", "/trade-api/v2/portfolio/orders"),
    ("1703123456789", "GET", "/trade-api/ws/v2"),
    ("1756512000000", "GET", "/trade-api/v2/portfolio/balance"),
    ("1756512000000", "DELETE", "/trade-api/v2/portfolio/orders/9f2c1e7a4b6d"),
)


def bits_hex(value: float) -> str:
    """16 lowercase hex digits of a double's IEEE-754 bits."""
    (bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return f"{bits:016x}"


def from_bits_hex(text: str) -> float:
    """The double whose IEEE-754 bits are the hex string ``text``."""
    (value,) = struct.unpack("<d", struct.pack("<Q", int(text, 16)))
    return float(value)


# --- frames -----------------------------------------------------------------------------------


def _required(**changes: object) -> dict[str, object]:
    fields: dict[str, object] = {
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
    fields.update(changes)
    return fields


def _legacy_v1() -> dict[str, object]:
    return {
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


def _legacy_v2() -> dict[str, object]:
    body = _legacy_v1() | {"schema_version": 2, "correlation_id": "corr-v2"}
    return body | {"recv_ns": 5000000000, "clock_domain": "host-a:1787290000", "dry_run": False}


def _legacy_v3() -> dict[str, object]:
    body = _legacy_v2() | {"schema_version": 3, "correlation_id": "corr-v3"}
    return body | {
        "wire_price_yes_dollars": 0.56,
        "exchange_index": 2,
        "available_size_contracts": 0.0,
        "price_ranges": [[0.0, 1.0, 0.01]],
    }


def frame_cases() -> dict[str, object]:
    """Every golden frame's payload by file stem: dataclasses, and raw dicts for legacy bodies."""
    return {
        "wake_defaults": WakeMessage(**_required()),  # type: ignore[arg-type]
        "wake_full_yes": WakeMessage(
            **_required(),  # type: ignore[arg-type]
            recv_ns=412737100311907,
            clock_domain="Ivory.local:1787289000",
            dry_run=True,
            wire_price_yes_dollars=0.56,
            exchange_index=2,
            available_size_contracts=143.0,
            price_ranges=[[0.0, 0.05, 0.001], [0.05, 0.95, 0.01], [0.95, 1.0, 0.001]],
            correlation_group="btc-majors",
        ),
        "wake_no_side": WakeMessage(
            **_required(direction="no", kalshi_price=0.30),  # type: ignore[arg-type]
            recv_ns=0,
            clock_domain="",
            dry_run=False,
            wire_price_yes_dollars=0.70,
            exchange_index=-1,
            available_size_contracts=0.0,
            correlation_group="",
        ),
        "wake_escapes": WakeMessage(
            **_required(  # type: ignore[arg-type]
                correlation_id='quote:" backslash:\\ tab:\t newline:\n',
                asset="\u0000\u001f\b\f\r",
                market_ticker="café € \U0001f680",
            ),
            clock_domain="host:ü",
            correlation_group="中文",
        ),
        "wake_awkward_floats": WakeMessage(
            **_required(  # type: ignore[arg-type]
                kalshi_price=0.1 + 0.2,
                model_probability=1 / 3,
                fee=1e-06,
                edge=-0.0,
            ),
            available_size_contracts=1e16,
            wire_price_yes_dollars=0.9999999999999999,
            price_ranges=[[0.0, 1.0, 0.01], [1e-05, 5e-324, 1.7976931348623157e308]],
        ),
        "ack_accepted": WakeAck(
            schema_version=4,
            correlation_id="0f9e6a2c-7d41-4b8e-9a55-1c2d3e4f5a6b",
            received_at_ms=1787289600125,
            status="accepted",
            reason=None,
        ),
        "ack_rejected": WakeAck(
            schema_version=4,
            correlation_id="",
            received_at_ms=1787289600125,
            status="rejected",
            reason="WakeMessage.__init__() got an unexpected keyword argument 'wat'",
        ),
        "legacy_v1": _legacy_v1(),
        "legacy_v2": _legacy_v2(),
        "legacy_v3": _legacy_v3(),
    }


# --- doubles ----------------------------------------------------------------------------------


def double_values() -> list[float]:
    """The curated doubles, then seeded uniform draws alternating with random finite bits."""
    values = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.01,
        0.56,
        0.1 + 0.2,
        1 / 3,
        1e-5,
        1e-6,
        9.999999999999999e15,
        1e16,
        1e15,
        1.2345678901234567e15,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        1e21,
        1.2345e-7,
        0.9999999999999999,
    ]
    rng = random.Random(DOUBLES_SEED)
    while len(values) < DOUBLES_COUNT:
        if len(values) % 2 == 0:
            values.append(rng.uniform(0.0, 1.0))
        else:
            (candidate,) = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))
            if math.isfinite(candidate):
                values.append(candidate)
    return values


def render_doubles() -> str:
    """``doubles.tsv``: bits, tab, orjson's text, one line per value."""
    return "".join(f"{bits_hex(v)}\t{orjson.dumps(v).decode()}\n" for v in double_values())


# --- snap_to_grid -----------------------------------------------------------------------------


def snap_cases() -> list[tuple[float, list[list[float]]]]:
    """Ties first, then grid edges, then seeded samples on CENT and LADDER alternately."""
    half = [[0.0, 1.0, 0.5]]
    half_to_two = [[0.0, 2.0, 0.5]]
    two_cents = [[0.0, 1.0, 0.02]]
    quarter = [[0.0, 1.0, 0.25]]
    cases: list[tuple[float, list[list[float]]]] = [
        (0.25, half),
        (0.75, half),
        (1.25, half_to_two),
        (1.75, half_to_two),
        (0.01, two_cents),
        (0.03, two_cents),
        (0.375, quarter),
        (0.625, quarter),
        (0.005, []),
        (0.015, []),
        (0.025, []),
        (0.0, CENT),
        (1.0, CENT),
        (0.05, LADDER),
        (0.95, LADDER),
        (0.0499, LADDER),
        (0.9501, LADDER),
        (1.5, CENT),
        (-0.25, CENT),
        (0.5, []),
        (0.5, [[0.0, 1.0, 0.0]]),
        (0.5, [[0.9, 1.0, 0.01]]),
        (0.123456789, CENT),
        (0.999999999, CENT),
    ]
    rng = random.Random(SNAP_SEED)
    for index in range(SNAP_SAMPLES):
        cases.append((rng.uniform(0.0, 1.0), CENT if index % 2 == 0 else LADDER))
    return cases


def render_ranges(ranges: Sequence[Sequence[float]]) -> str:
    """Triples joined by ``;``, each triple's bit strings joined by ``:``."""
    return ";".join(":".join(bits_hex(bound) for bound in triple) for triple in ranges)


def render_snap() -> str:
    """``snap_to_grid.tsv``: price bits, ranges, result bits."""
    return "".join(
        f"{bits_hex(price)}\t{render_ranges(ranges)}\t{bits_hex(snap_to_grid(price, ranges))}\n"
        for price, ranges in snap_cases()
    )


# --- percentiles ------------------------------------------------------------------------------


def percentile_vectors() -> list[tuple[str, list[float]]]:
    """The named sample vectors, in file order, values in their original (unsorted) order."""
    rng = random.Random(PERCENTILE_SEED)
    n2000 = [rng.lognormvariate(-1.0, 0.45) for _ in range(PERCENTILE_DRAWS)]
    return [
        ("single", [0.0039]),
        ("pair", [0.0031, 0.0052]),
        ("triple", [0.0031, 0.0044, 0.0052]),
        ("unsorted", [0.9, 0.1, 0.5, 0.3, 0.7]),
        ("ties", [0.5] * 7 + [1.5] * 3),
        ("wide", [-1.5, -0.25, 1e-9, 1.0, 1e9]),
        ("n2000", n2000),
    ]


def render_percentiles() -> str:
    """``percentiles.tsv``: per vector a header, its values' bits, then one line per rank."""
    lines: list[str] = []
    for name, values in percentile_vectors():
        lines.append(f"vector\t{name}\t{len(values)}")
        lines.extend(bits_hex(value) for value in values)
        lines.extend(
            f"p\t{bits_hex(p)}\t{bits_hex(percentile(values, p))}" for p in PERCENTILE_RANKS
        )
    return "".join(line + "\n" for line in lines)


# --- writing ----------------------------------------------------------------------------------


def deterministic_files() -> dict[str, bytes]:
    """Every fixture that must come out identical on every run, by path relative to golden/."""
    files = {f"frames/{name}.frame": encode_frame(case) for name, case in frame_cases().items()}
    files["doubles.tsv"] = render_doubles().encode()
    files["snap_to_grid.tsv"] = render_snap().encode()
    files["percentiles.tsv"] = render_percentiles().encode()
    return files


def signing_files() -> dict[str, bytes]:
    """A throwaway key's public half and its signatures over ``SIGNING_ROWS`` (new every run)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with tempfile.TemporaryDirectory(prefix="golden-key-") as directory:
        private_path = Path(directory) / "throwaway.pem"
        private_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        signer = KalshiSigner(private_path)
        rows = [(*row, signer.sign(*row)) for row in SIGNING_ROWS]
    verifier = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
    for timestamp, method, path, signature in rows:
        message = (timestamp + method + path).encode()
        # Raises InvalidSignature: never commit a vector the tests would refuse.
        key.public_key().verify(base64.b64decode(signature), message, verifier, hashes.SHA256())
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    vectors = "".join("\t".join(row) + "\n" for row in rows)
    return {"signing/public_key.pem": public_pem, "signing/vectors.tsv": vectors.encode()}


def source_text() -> str:
    """``SOURCE.txt``: when and with what the fixtures were made, and how to make them again."""
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    return (
        "Generated by golden/generate.py. Do not edit by hand.\n"
        "\n"
        f"date: {today}\n"
        f"python: {platform.python_implementation()} {platform.python_version()}"
        f" ({sys.platform}, {platform.machine()})\n"
        f"orjson: {orjson.__version__}\n"
        f"cryptography: {cryptography.__version__}\n"
        "\n"
        "Regenerate from the repository root, then review and commit the diff:\n"
        "\n"
        "    .venv/bin/python golden/generate.py\n"
        "\n"
        "frames/, doubles.tsv, snap_to_grid.tsv and percentiles.tsv are deterministic; a\n"
        "change in them is a behaviour change to explain. percentiles.tsv's n2000 draws go\n"
        "through the platform's exp (lognormvariate), so another libm can move a raw sample\n"
        "by one ulp.\n"
        "signing/ changes on every run: a throwaway RSA-2048 key (only its public half is kept)\n"
        "signs the five (timestamp, method, path) rows of vectors.tsv; PSS salts randomly.\n"
    )


def main() -> None:
    files = deterministic_files() | signing_files()
    files["SOURCE.txt"] = source_text().encode()
    for relative, content in sorted(files.items()):
        path = GOLDEN / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        print(f"wrote golden/{relative} ({len(content)} bytes)")


if __name__ == "__main__":
    main()
