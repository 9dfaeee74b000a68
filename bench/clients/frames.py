"""The one message shape the benchmark sends, and exact-read helpers for acks. No I/O of its own."""

from __future__ import annotations

import time
from typing import Final

from executor.clock import clock_domain
from executor.wire.protocol import PREFIX_BYTES, WakeMessage, encode_frame

LADDER: Final = [[0.0, 0.05, 0.001], [0.05, 0.95, 0.01], [0.95, 1.0, 0.001]]
"""A realistic three-band tick grid, so the body has the size of a real v4 wake."""


def wake_message(correlation_id: str, sent_at_ns: int) -> WakeMessage:
    """A full schema-v4 shadow fire (``dry_run`` true: the whole path runs, nothing is placed)."""
    now_ms = time.time_ns() // 1_000_000
    return WakeMessage(
        schema_version=4,
        correlation_id=correlation_id,
        market_ticker="KXBTCD-26DEC31-T100000",
        asset="BTC",
        direction="yes",
        kalshi_price=0.55,
        model_probability=0.61,
        fee=0.0175,
        edge=0.0425,
        decision_ts_ms=now_ms,
        sent_at_ms=now_ms,
        sent_at_ns=sent_at_ns,
        recv_ns=0,
        clock_domain="",
        dry_run=True,
        wire_price_yes_dollars=0.55,
        exchange_index=-1,
        available_size_contracts=12.0,
        price_ranges=LADDER,
        correlation_group="bench",
    )


def in_process_wake(correlation_id: str, *, dry_run: bool = False) -> WakeMessage:
    """A wake handed to a fire path in this process (this host's clock, received now, shard 0,
    a price the grid takes): what the in-process scenarios fire."""
    return WakeMessage(
        schema_version=4,
        correlation_id=correlation_id,
        market_ticker="KXBENCH-26DEC31-B1",
        asset="BTC",
        direction="yes",
        kalshi_price=0.5,
        model_probability=0.6,
        fee=0.01,
        edge=0.05,
        decision_ts_ms=0,
        sent_at_ms=0,
        sent_at_ns=0,
        recv_ns=time.perf_counter_ns(),
        clock_domain=clock_domain(),
        dry_run=dry_run,
        wire_price_yes_dollars=0.5,
        exchange_index=0,
    )


def wake_frame(correlation_id: str, sent_at_ns: int) -> bytes:
    """``wake_message`` encoded as one frame, prefix included."""
    return encode_frame(wake_message(correlation_id, sent_at_ns))


def correlation_id(client: str, index: int) -> str:
    """Unique per frame within a run; the executor's rows are read back by order, not by id."""
    return f"bench-{client}-{index:06d}"


def body_length(prefix: bytes) -> int:
    """The length a 4-byte ack prefix declares (acks are trusted: they come from the executor)."""
    if len(prefix) != PREFIX_BYTES:
        raise ValueError(f"short ack prefix: {len(prefix)} bytes")
    return int.from_bytes(prefix, "big")
