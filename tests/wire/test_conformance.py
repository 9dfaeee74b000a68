"""The project's golden fixtures equal the reference implementation's output (PROTOCOL.md).

The reference is ``anaborne/prediction-market-infra``. Its golden output is what the C++ port's
generator (``anaborne/executor-hotpath-cpp``, ``tests/golden/generate_golden.py``) writes by running
the reference's own code (``src/kalshi_bot/ipc/protocol.py`` and ``ipc/executor_server.py``,
``benchmarks/latency_bench.py``), with five signatures the reference signer made
(``tests/golden/signing/``); that repository commits it in its ``tests/golden/`` folder. This module
runs only when ``TRIO_EXECUTOR_REFERENCE_GOLDEN`` names such a folder: without it the whole module
is skipped, saying where the output comes from (nothing outside the checkout is read by default,
and the reference's output is never copied in); a name that is not a folder is an error, not a
skip. ``percentiles.tsv`` goes through the platform's ``exp`` (``golden/SOURCE.txt``), so compare
it with a copy generated on Linux with glibc, as this project's is.

Signatures cannot be compared byte for byte (PSS salts randomly): instead the reference signer's
five signatures must verify, with the reference's public key, over the messages this project's
``signing_message`` builds.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from executor.signer import signing_message

ENV_OVERRIDE = "TRIO_EXECUTOR_REFERENCE_GOLDEN"
GOLDEN = Path(__file__).resolve().parents[2] / "golden"


NOT_GIVEN = (
    f"reference golden output not given: set {ENV_OVERRIDE} to a folder holding it (the reference,"
    " anaborne/prediction-market-infra, run through anaborne/executor-hotpath-cpp's"
    " tests/golden/generate_golden.py; that repository commits it in tests/golden/)"
)
"""Why the module is skipped, and where the reference's output comes from."""


def _reference_dir() -> Path:
    """The folder ``TRIO_EXECUTOR_REFERENCE_GOLDEN`` names (the module is skipped without one)."""
    override = os.environ.get(ENV_OVERRIDE)
    if not override:
        pytest.skip(NOT_GIVEN, allow_module_level=True)
    path = Path(override)
    if not path.is_dir():
        pytest.fail(f"{ENV_OVERRIDE}={override!r} is not a directory", pytrace=False)
    return path


REFERENCE = _reference_dir()

# Every deterministic fixture; signing/ is random by nature and checked by verification below.
DETERMINISTIC = sorted(
    [f"frames/{path.name}" for path in (GOLDEN / "frames").glob("*.frame")]
    + ["doubles.tsv", "snap_to_grid.tsv", "percentiles.tsv"]
)


def test_frame_sets_match() -> None:
    """The project has exactly the frame files the reference has."""
    reference = sorted(path.name for path in (REFERENCE / "frames").glob("*.frame"))
    project = sorted(path.name for path in (GOLDEN / "frames").glob("*.frame"))
    assert project == reference
    assert len(project) == 10


@pytest.mark.parametrize("relative", DETERMINISTIC)
def test_fixture_equals_reference_byte_for_byte(relative: str) -> None:
    """Each project fixture is byte-identical to the reference's file of the same name."""
    project = (GOLDEN / relative).read_bytes()
    reference = (REFERENCE / relative).read_bytes()
    if project != reference:
        offset = next(
            (i for i, (a, b) in enumerate(zip(project, reference, strict=False)) if a != b),
            min(len(project), len(reference)),
        )
        ours, theirs = project[offset : offset + 40], reference[offset : offset + 40]
        pytest.fail(
            f"{relative} differs from the reference at byte {offset}: {ours!r} != {theirs!r}"
        )


SALT_32 = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)


def _reference_key() -> rsa.RSAPublicKey:
    pem = (REFERENCE / "signing" / "public_key.pem").read_bytes()
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key, rsa.RSAPublicKey)
    return key


def _reference_vectors() -> list[tuple[str, str, str, str]]:
    text = (REFERENCE / "signing" / "vectors.tsv").read_text(encoding="ascii")
    rows = [line.split("\t") for line in text.splitlines()]
    assert all(len(row) == 4 for row in rows)
    return [(row[0], row[1], row[2], row[3]) for row in rows]


def _verifies(key: rsa.RSAPublicKey, signature_b64: str, message: bytes) -> bool:
    try:
        key.verify(
            base64.b64decode(signature_b64, validate=True), message, SALT_32, hashes.SHA256()
        )
    except InvalidSignature:
        return False
    return True


def test_reference_signatures_verify_over_project_messages() -> None:
    """All five reference signatures verify (salt 32) over the messages signing_message builds."""
    vectors = _reference_vectors()
    assert len(vectors) == 5
    key = _reference_key()
    for timestamp, method, path, signature in vectors:
        assert _verifies(key, signature, signing_message(timestamp, method, path)), (method, path)


def test_reference_signatures_fail_for_other_messages() -> None:
    """Each reference signature fails for the next row's message (the check is not vacuous)."""
    vectors = _reference_vectors()
    key = _reference_key()
    for row, other in zip(vectors, vectors[1:] + vectors[:1], strict=True):
        assert not _verifies(key, row[3], signing_message(*other[:3]))


def test_project_signs_the_reference_messages() -> None:
    """The project's own signing fixture covers the same (timestamp, method, path) rows."""
    text = (GOLDEN / "signing" / "vectors.tsv").read_text(encoding="ascii")
    project_rows = [tuple(line.split("\t")[:3]) for line in text.splitlines()]
    assert project_rows == [row[:3] for row in _reference_vectors()]
