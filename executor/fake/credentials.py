"""The fake exchange's throwaway world: an API key pair and a CA made per run (DISPATCH.md §9).

:class:`FakeCredentials` writes them into a private directory: the key the executor signs with,
the CA certificate it must trust (never turning verification off) and the fake's own certificate
for 127.0.0.1 and localhost (trustme). Blocking file and key work: call it from a thread on a loop.
"""

from __future__ import annotations

import os
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass
class FakeCredentials:
    """A throwaway world for one run: an API key pair and a CA the executor must trust.

    Attributes:
        key_id: the API key id.
        private_key_path: RSA-2048 PKCS#8 PEM, mode 0600 (the executor signs with it).
        ca_file: the CA certificate (PEM) the executor verifies the fake's TLS with.
        server_pem: the fake's certificate chain and its key (PEM, mode 0600).
    """

    key_id: str
    private_key_path: Path
    ca_file: Path
    server_pem: Path | None = None

    @classmethod
    def generate(cls, directory: Path) -> FakeCredentials:
        """Write a fresh key, CA and server certificate into ``directory`` (blocking: ~0.1 s)."""
        directory.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private_key_path = directory / "api-key.pem"
        _write_private(
            private_key_path,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        authority = trustme.CA(organization_name="trio-executor fake exchange")
        ca_file = directory / "ca.pem"
        ca_file.write_bytes(authority.cert_pem.bytes())
        leaf = authority.issue_cert("127.0.0.1", "localhost")
        server_pem = directory / "server.pem"
        _write_private(server_pem, leaf.private_key_and_cert_chain_pem.bytes())
        return cls(str(uuid.uuid4()), private_key_path, ca_file, server_pem)

    def public_key(self) -> rsa.RSAPublicKey:
        """The public half of the API key: all the fake keeps to verify with (blocking)."""
        key = serialization.load_pem_private_key(self.private_key_path.read_bytes(), None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{self.private_key_path}: not an RSA key")
        return key.public_key()

    def server_context(self) -> ssl.SSLContext:
        """The fake's server TLS context (blocking: reads ``server_pem``)."""
        if self.server_pem is None:
            raise ValueError("these credentials have no server certificate; use generate()")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_pem)
        return context


def _write_private(path: Path, data: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), 0o600)  # the mode above is masked by umask; this is not
        file.write(data)


__all__ = ["FakeCredentials"]
