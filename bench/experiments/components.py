"""In-process component timings: decode, encode_ack and sign, each in a hot timing loop."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.clients.frames import correlation_id, wake_frame
from executor.wire.protocol import decode_wake_message, encode_accepted_ack

SIGN_METHOD = "GET"
SIGN_PATH = "/trade-api/v2/portfolio/orders"


def _time_loop(operation: Callable[[], object], warmup: int, iterations: int) -> list[float]:
    """Durations in microseconds of ``iterations`` calls after ``warmup`` discarded ones."""
    durations: list[float] = []
    for index in range(warmup + iterations):
        started = time.perf_counter_ns()
        operation()
        elapsed = time.perf_counter_ns() - started
        if index >= warmup:
            durations.append(elapsed / 1000.0)
    return durations


def time_decode(warmup: int, iterations: int) -> list[float]:
    """``decode_wake_message`` over the benchmark's frame body."""
    body = wake_frame(correlation_id("component", 0), time.perf_counter_ns())[4:]
    return _time_loop(lambda: decode_wake_message(body), warmup, iterations)


def time_encode_ack(warmup: int, iterations: int) -> list[float]:
    """``encode_accepted_ack`` for the benchmark's correlation id."""
    cid = correlation_id("component", 0)
    received_at_ms = time.time_ns() // 1_000_000
    return _time_loop(lambda: encode_accepted_ack(cid, received_at_ms), warmup, iterations)


def time_sign(warmup: int, iterations: int) -> list[float] | None:
    """``KalshiSigner.sign`` with a throwaway RSA-2048 key; None (with a note) if unavailable."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        from executor.signer import KalshiSigner
    except ImportError as error:
        print(f"bench: sign skipped ({error})", file=sys.stderr)
        return None
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with tempfile.TemporaryDirectory(prefix="bench-key-") as directory:
        key_path = Path(directory) / "throwaway.pem"
        key_path.write_bytes(pem)
        key_path.chmod(0o600)
        signer = KalshiSigner(key_path, key_id="bench")
    timestamp = str(time.time_ns() // 1_000_000)
    return _time_loop(lambda: signer.sign(timestamp, SIGN_METHOD, SIGN_PATH), warmup, iterations)


def time_components(warmup: int, iterations: int) -> dict[str, list[float]]:
    """Every component that can run here, by span name."""
    spans = {
        "decode": time_decode(warmup, iterations),
        "encode_ack": time_encode_ack(warmup, iterations),
    }
    signed = time_sign(warmup, iterations)
    if signed is not None:
        spans["sign"] = signed
    return spans
