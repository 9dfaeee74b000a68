"""Kalshi request signing: RSA-PSS over ``timestamp + METHOD + path``.

Kalshi authenticates every REST request and the WebSocket handshake with three headers: the key id,
the millisecond timestamp, and a base64 RSA-PSS signature (SHA-256, MGF1-SHA-256, 32-byte salt)
over the timestamp, the upper-case method and the request path, concatenated with no separator.

The signer is not on the executor's timed path (signing happens past dispatch). The private key is
loaded once, eagerly, so a bad key stops the service at start-up rather than at the first fire.

Method case: the message carries the method upper case, so ``sign`` upper-cases what it is given
(``"get"`` signs ``GET``). HTTP clients put the method on the wire upper case, so this is the
message the exchange rebuilds; refusing lower case instead would turn a harmless spelling into a
failure on the fire path.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Final

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SALT_BYTES: Final = 32
"""PSS salt length (bytes): equal to the SHA-256 digest length, as Kalshi requires."""

WEBSOCKET_METHOD: Final = "GET"
WEBSOCKET_PATH: Final = "/trade-api/ws/v2"
"""What the WebSocket handshake signs in place of a REST method and path."""

HEADER_KEY: Final = "KALSHI-ACCESS-KEY"
HEADER_TIMESTAMP: Final = "KALSHI-ACCESS-TIMESTAMP"
HEADER_SIGNATURE: Final = "KALSHI-ACCESS-SIGNATURE"

# Built once: both are immutable descriptions, and sign() is benchmarked.
_PSS: Final = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=SALT_BYTES)
_DIGEST: Final = hashes.SHA256()


class SignerKeyError(ValueError):
    """The private key file cannot be used; the message names the path and the problem."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"Kalshi private key {str(path)!r}: {problem}")
        self.path = path
        self.problem = problem


def signing_message(timestamp: str, method: str, path: str) -> bytes:
    """The exact bytes Kalshi expects signed: ``timestamp + METHOD + path``, UTF-8.

    Args:
        timestamp: milliseconds since the epoch as a decimal string (the
            ``KALSHI-ACCESS-TIMESTAMP`` header value).
        method: the HTTP method; upper-cased here.
        path: the full request path including ``/trade-api/v2``, without scheme, host or query.
    """
    return (timestamp + method.upper() + path).encode()


def _load_rsa_key(path: Path) -> rsa.RSAPrivateKey:
    try:
        pem = path.read_bytes()
    except FileNotFoundError:
        raise SignerKeyError(path, "no such file") from None
    except OSError as error:
        raise SignerKeyError(path, f"cannot be read ({error.strerror or error})") from None
    try:
        # password=None never prompts; an encrypted PEM raises TypeError instead.
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:
        raise SignerKeyError(
            path, "the PEM is encrypted; a service cannot prompt, provide an unencrypted key"
        ) from None
    except UnsupportedAlgorithm:
        raise SignerKeyError(path, "the key uses an unsupported algorithm") from None
    except ValueError:
        raise SignerKeyError(
            path, "not a PEM private key (PKCS#8 or traditional RSA) or it is malformed"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        kind = type(key).__name__.removesuffix("PrivateKey") or "unknown"
        raise SignerKeyError(path, f"the key is not RSA (found {kind})")
    return key


class KalshiSigner:
    """Signs Kalshi REST requests and the WebSocket handshake with one RSA private key.

    Args:
        private_key_path: PEM file, PKCS#8 (``BEGIN PRIVATE KEY``) or traditional
            (``BEGIN RSA PRIVATE KEY``), unencrypted.
        key_id: the API key id sent as ``KALSHI-ACCESS-KEY``.

    Raises:
        SignerKeyError: the file is missing or unreadable, the PEM is malformed or encrypted, or
            the key is not RSA.
    """

    def __init__(self, private_key_path: str | Path, key_id: str = "") -> None:
        self.private_key_path = Path(private_key_path)
        self.key_id = key_id
        self._key = _load_rsa_key(self.private_key_path)

    def public_key(self) -> rsa.RSAPublicKey:
        """The public half of the loaded key (for verifiers and fixtures)."""
        return self._key.public_key()

    def sign(self, timestamp: str, method: str, path: str) -> str:
        """Standard base64 (no line breaks) of the RSA-PSS signature over the signing message."""
        signature = self._key.sign(signing_message(timestamp, method, path), _PSS, _DIGEST)
        return base64.b64encode(signature).decode("ascii")

    def sign_websocket_auth(self, timestamp: str) -> str:
        """The signature for the WebSocket handshake: ``timestamp + "GET" + "/trade-api/ws/v2"``."""
        return self.sign(timestamp, WEBSOCKET_METHOD, WEBSOCKET_PATH)

    def headers(self, timestamp: str, method: str, path: str) -> dict[str, str]:
        """The three Kalshi authentication headers for one request."""
        return {
            HEADER_KEY: self.key_id,
            HEADER_TIMESTAMP: timestamp,
            HEADER_SIGNATURE: self.sign(timestamp, method, path),
        }
