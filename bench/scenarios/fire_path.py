"""Where a real order's ``detect_wire`` goes: its path cut into segments that add up to it.

Every stamp comes from one clock (``perf_counter_ns`` of this host) and is an offset from the
wake's ``recv_ns``: the fire client's own (the frame's bytes made, ``sendall`` returned; written by
``python -m bench.clients.fire --stamps``) and the executor's (the ``path_us`` object of its
``detect_wire`` row's metadata, ``executor.exchange.orders.stages.PATH_STAMPS``; the asyncio
baseline writes the same keys). A segment runs from one stamp to the next one the fire reached, so
the segments of one fire add up to its ``detect_wire`` exactly; their means add up to its mean
(their medians need not). The client's ``written`` stamp can fall after the executor's ``read``
(``sendall`` returns after the kernel woke the reader): ``transit`` is then negative and
``client_write`` holds the overlap.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SEGMENTS: Final = (
    ("client_build", "client_built"),
    ("client_write", "client_written"),
    ("transit_read", "read"),
    ("decode_ack", "acked"),
    ("handoff", "fire"),
    ("decide", "decided"),
    ("audit", "build"),
    ("build", "built"),
    ("to_sign", "sign"),
    ("sign", "signed"),
    ("request", "sent"),
    ("write", "wire"),
)
"""``(segment, the stamp that ends it)`` in path order; each starts where the previous ended (the
first at ``recv_ns``). ``transit_read``: kernel transit and the executor waking to read;
``handoff``: ack out to the fire path taking the wake; ``audit``: the order's ids, its ``pending``
row and intent record; ``to_sign``: the rate-limit token and a connection; ``request``: the
request's bytes made; ``write``: the ``send`` (``dispatch_wire``)."""

SEGMENT_PREFIX: Final = "path:"
"""The ``span`` of a segment's series (``path:decode_ack``), beside the stage rows' spans."""


def segments_of(
    path_us: Mapping[str, float], client: tuple[float, float] | None
) -> dict[str, float] | None:
    """One fire's segments (µs), or None when a stamp is missing (every stamp is needed for the
    segments to add up to ``detect_wire``).

    Args:
        path_us: the executor's stamps after ``recv_ns`` (its ``detect_wire`` metadata).
        client: the client's ``(built_us, written_us)`` for this wake, None when not recorded.
    """
    if client is None:
        return None
    stamps = {"client_built": client[0], "client_written": client[1], **path_us}
    found: dict[str, float] = {}
    previous = 0.0
    for segment, end in SEGMENTS:
        value = stamps.get(end)
        if value is None:
            return None
        found[segment] = round(value - previous, 1)
        previous = value
    return found


__all__ = ["SEGMENTS", "SEGMENT_PREFIX", "segments_of"]
