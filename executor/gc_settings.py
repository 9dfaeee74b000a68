"""The garbage collector's settings for a serving executor.

CPython's cycle collector runs a young collection every 700 net allocations of container
objects, and every tenth of those moves survivors on until a full collection walks every object
the process holds: ~55,000 once the service is built (modules, the order path, templates). A
frame allocates a few containers (the decoded wake, its row, the fire's bookkeeping), so a flat
out connection paid ~1,400 young collections and a dozen full ones in 3 s, each full one a
~10 ms pause of the event loop: measured, docs/RESULTS.md (2026-12-04, issue 24).

:func:`settle_heap`, called once the service is built and before its socket is reachable,
collects what start-up left behind, freezes the survivors (``gc.freeze``: later collections
skip them; they are still freed by reference counting) and raises the young threshold, so a
collection is rare and only walks what serving allocated since. Cycles are still collected.
"""

from __future__ import annotations

import gc
from typing import Literal

GcMode = Literal["tuned", "python"]
"""``tuned`` applies :func:`settle_heap`; ``python`` leaves the interpreter's settings alone."""

GC_MODES: tuple[GcMode, ...] = ("tuned", "python")

YOUNG_THRESHOLD = 5_000
"""Net container allocations between young collections (CPython's default is 700). Measured
beside 700 and 50,000 (docs/RESULTS.md, 2026-12-04): 5,000 left a handful of young collections
of ~0.5 ms in 3 s flat out, where 700 ran ~1,400."""


def settle_heap(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """Collect, freeze what survives, and collect young objects every ``young_threshold``
    allocations; the older generations' thresholds stay as they are."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)
