"""The Kalshi signer, checked by an independent RSA-PSS verifier (SIGNER.md).

PSS salts randomly, so there are no golden signature bytes: every signature is verified instead,
with cryptography's own ``verify`` and explicitly written parameters (never the signer's). Keys
are throwaway RSA-2048 keys made in temporary directories.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from executor.signer import KalshiSigner, SignerKeyError, signing_message
from tests.support.signatures import verifies

TIMESTAMP = "1703123456789"
METHOD = "POST"
PATH = "/trade-api/v2/portfolio/events/orders"
KEY_ID = "a952bcbe-ec3b-4b5b-b8f9-11dae589608c"

# The verifier's parameters, written out here so that a wrong constant in the signer cannot hide.


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("signer-keys")


def write_pem(
    path: Path,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    private_format: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8,
    encryption: serialization.KeySerializationEncryption | None = None,
) -> Path:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        private_format,
        encryption or serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    return path


@pytest.fixture(scope="module")
def signer(rsa_key: rsa.RSAPrivateKey, key_dir: Path) -> KalshiSigner:
    return KalshiSigner(write_pem(key_dir / "pkcs8.pem", rsa_key), key_id=KEY_ID)


def test_signing_message_concatenates_without_separator() -> None:
    """The message is timestamp + METHOD + path, UTF-8, with nothing between them."""
    assert (
        signing_message(TIMESTAMP, METHOD, PATH)
        == b"1703123456789POST/trade-api/v2/portfolio/events/orders"
    )


def test_signing_message_upper_cases_the_method() -> None:
    """A lower-case method is signed upper case, the way it travels on the wire."""
    assert signing_message(TIMESTAMP, "delete", "/p") == b"1703123456789DELETE/p"


def test_signature_verifies_independently(signer: KalshiSigner, rsa_key: rsa.RSAPrivateKey) -> None:
    """A signature verifies with PSS(MGF1-SHA256, salt 32) + SHA256 over the exact message."""
    signature = signer.sign(TIMESTAMP, METHOD, PATH)
    message = b"1703123456789POST/trade-api/v2/portfolio/events/orders"
    assert verifies(rsa_key.public_key(), signature, message)


def test_signature_is_single_line_standard_base64(signer: KalshiSigner) -> None:
    """The output is padded standard base64 of a 256-byte signature, with no line break."""
    signature = signer.sign(TIMESTAMP, METHOD, PATH)
    assert "\n" not in signature
    assert "-" not in signature and "_" not in signature
    assert signature.endswith("=")  # 256 bytes is not a multiple of 3: padding is present
    assert len(base64.b64decode(signature, validate=True)) == 256


def test_urlsafe_alphabet_would_be_refused() -> None:
    """The strict decoder the tests rely on rejects the URL-safe alphabet (negative twin)."""
    with pytest.raises(binascii.Error):
        base64.b64decode("ab-_", validate=True)


def test_signing_twice_salts_differently_and_both_verify(
    signer: KalshiSigner, rsa_key: rsa.RSAPrivateKey
) -> None:
    """PSS is randomised: two signatures of one message differ, and both verify."""
    first = signer.sign(TIMESTAMP, METHOD, PATH)
    second = signer.sign(TIMESTAMP, METHOD, PATH)
    assert first != second
    message = signing_message(TIMESTAMP, METHOD, PATH)
    assert verifies(rsa_key.public_key(), first, message)
    assert verifies(rsa_key.public_key(), second, message)


@pytest.mark.parametrize(
    ("timestamp", "method", "path"),
    [
        ("1703123456790", METHOD, PATH),
        (TIMESTAMP, "GET", PATH),
        (TIMESTAMP, METHOD, "/trade-api/v2/portfolio/orders"),
        (TIMESTAMP, METHOD, PATH + "?limit=1"),
    ],
    ids=["timestamp", "method", "path", "query"],
)
def test_tampered_message_fails(
    signer: KalshiSigner,
    rsa_key: rsa.RSAPrivateKey,
    timestamp: str,
    method: str,
    path: str,
) -> None:
    """A signature does not verify for a message with another timestamp, method or path."""
    signature = signer.sign(TIMESTAMP, METHOD, PATH)
    assert not verifies(rsa_key.public_key(), signature, signing_message(timestamp, method, path))


def test_max_salt_signature_fails_the_pinned_verifier(rsa_key: rsa.RSAPrivateKey) -> None:
    """A valid PSS signature with a 222-byte salt is refused: the verifier pins salt 32."""
    message = signing_message(TIMESTAMP, METHOD, PATH)
    max_salt = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.MAX_LENGTH)
    raw = rsa_key.sign(message, max_salt, hashes.SHA256())
    signature = base64.b64encode(raw).decode()
    # It is a genuine signature: a verifier told the salt is 222 bytes accepts it ...
    salt_222 = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=222)
    rsa_key.public_key().verify(raw, message, salt_222, hashes.SHA256())
    # ... and the verifier every other test uses does not.
    assert not verifies(rsa_key.public_key(), signature, message)


def test_websocket_auth_signs_the_handshake_path(
    signer: KalshiSigner, rsa_key: rsa.RSAPrivateKey
) -> None:
    """The WebSocket signature covers timestamp + GET + /trade-api/ws/v2 and nothing else."""
    signature = signer.sign_websocket_auth(TIMESTAMP)
    public = rsa_key.public_key()
    assert verifies(public, signature, b"1703123456789GET/trade-api/ws/v2")
    assert not verifies(public, signature, b"1703123456789GET/trade-api/v2")


def test_headers_carry_key_timestamp_and_a_valid_signature(
    signer: KalshiSigner, rsa_key: rsa.RSAPrivateKey
) -> None:
    """headers() gives exactly the three Kalshi headers, with a signature over the request."""
    headers = signer.headers(TIMESTAMP, METHOD, PATH)
    assert set(headers) == {
        "KALSHI-ACCESS-KEY",
        "KALSHI-ACCESS-TIMESTAMP",
        "KALSHI-ACCESS-SIGNATURE",
    }
    assert headers["KALSHI-ACCESS-KEY"] == KEY_ID
    assert headers["KALSHI-ACCESS-TIMESTAMP"] == TIMESTAMP
    message = signing_message(TIMESTAMP, METHOD, PATH)
    assert verifies(rsa_key.public_key(), headers["KALSHI-ACCESS-SIGNATURE"], message)


def test_traditional_pem_loads_and_signs(rsa_key: rsa.RSAPrivateKey, key_dir: Path) -> None:
    """A traditional ("BEGIN RSA PRIVATE KEY") PEM loads as well as PKCS#8."""
    path = write_pem(
        key_dir / "traditional.pem", rsa_key, serialization.PrivateFormat.TraditionalOpenSSL
    )
    assert path.read_bytes().startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    signature = KalshiSigner(path).sign(TIMESTAMP, METHOD, PATH)
    assert verifies(rsa_key.public_key(), signature, signing_message(TIMESTAMP, METHOD, PATH))


def test_public_key_is_the_loaded_keys_half(
    signer: KalshiSigner, rsa_key: rsa.RSAPrivateKey
) -> None:
    """public_key() returns the public half of the key that was loaded."""
    assert signer.public_key().public_numbers() == rsa_key.public_key().public_numbers()


def _missing(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    return directory / "does-not-exist.pem"


def _directory(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    path = directory / "a-directory.pem"
    path.mkdir()
    return path


def _malformed(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    path = directory / "malformed.pem"
    path.write_bytes(b"-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
    return path


def _public_only(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    path = directory / "public.pem"
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


def _encrypted_pkcs8(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    encryption = serialization.BestAvailableEncryption(b"hunter2")
    return write_pem(
        directory / "encrypted-pkcs8.pem", key, serialization.PrivateFormat.PKCS8, encryption
    )


def _encrypted_traditional(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    encryption = serialization.BestAvailableEncryption(b"hunter2")
    return write_pem(
        directory / "encrypted-traditional.pem",
        key,
        serialization.PrivateFormat.TraditionalOpenSSL,
        encryption,
    )


def _ec_key(directory: Path, key: rsa.RSAPrivateKey) -> Path:
    return write_pem(directory / "ec.pem", ec.generate_private_key(ec.SECP256R1()))


@pytest.mark.parametrize(
    ("make_path", "problem"),
    [
        (_missing, "no such file"),
        (_directory, "cannot be read"),
        (_malformed, "malformed"),
        (_public_only, "malformed"),
        (_encrypted_pkcs8, "encrypted"),
        (_encrypted_traditional, "encrypted"),
        (_ec_key, "not RSA"),
    ],
    ids=lambda value: str(getattr(value, "__name__", value)).strip("_"),
)
def test_unusable_key_is_refused_naming_path_and_problem(
    tmp_path: Path,
    rsa_key: rsa.RSAPrivateKey,
    make_path: Callable[[Path, rsa.RSAPrivateKey], Path],
    problem: str,
) -> None:
    """Each unusable key file raises SignerKeyError whose one-line message has the path and why."""
    path = make_path(tmp_path, rsa_key)
    with pytest.raises(SignerKeyError) as caught:
        KalshiSigner(path)
    message = str(caught.value)
    assert str(path) in message
    assert problem in message
    assert "\n" not in message
    assert isinstance(caught.value, ValueError)
    assert caught.value.path == path
