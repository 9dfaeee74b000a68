"""An RSA-PSS verifier independent of the signer, for the tests that check signatures."""

from __future__ import annotations

import base64

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

VERIFY_PADDING = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
"""PSS with MGF1-SHA256 and a 32-byte salt: what SIGNER.md says the exchange verifies."""


def verifies(public_key: rsa.RSAPublicKey, signature_b64: str, message: bytes) -> bool:
    """Whether ``signature_b64`` is a valid PSS-SHA256 (salt 32) signature of ``message``."""
    signature = base64.b64decode(signature_b64, validate=True)
    try:
        public_key.verify(signature, message, VERIFY_PADDING, hashes.SHA256())
    except InvalidSignature:
        return False
    return True
