"""The garbage collector's settings for a serving executor.

CPython's cycle collector runs a young collection every 700 net allocations of container
objects (2,000 since Python 3.13); every tenth of those is a middle collection, and every tenth
of those a full one (once enough has survived), which walks every object the process holds:
~55,000 once the service is built (modules, the order path, templates). A frame allocates a few
containers (the decoded wake, its row, the fire's bookkeeping), so on Python 3.11 a flat out
connection paid ~1,400 young collections and a dozen full ones in 3 s, each full one a 10-20 ms
pause of the event loop: measured, docs/performance/notebook/ (2026-12-04, issue 24). Python 3.13's
collector ran no full collection in the same test, and there this makes no measured difference.

:func:`settle_heap`, called once the service is built and before its socket is reachable,
collects what start-up left behind, freezes the survivors (``gc.freeze``: later collections
skip them; they are still freed by reference counting) and raises the young threshold, so a
collection is rare and only walks what serving allocated since. Cycles are still collected.
"""

from __future__ import annotations

import gc
from typing import Final, Literal, get_args

GcMode = Literal["tuned", "python"]
"""``tuned`` applies :func:`settle_heap`; ``python`` leaves the interpreter's settings alone."""

GC_MODES: Final[tuple[GcMode, ...]] = get_args(GcMode)

YOUNG_THRESHOLD: Final = 5_000
"""Net container allocations between young collections (CPython's default is 700, 2,000 since
3.13). Measured on 3.11 (docs/performance/notebook/, 2026-12-04): with the heap frozen, 5,000 left
14-17 young collections, 2-4 ms in all, in 3 s of one connection flat out, where the interpreter's
settings ran 1,100-1,400 young and 9-11 full ones, 230-280 ms; 50,000 did no better."""


def settle_heap() -> None:
    """Collect, freeze what survives, and collect young objects every ``YOUNG_THRESHOLD``
    allocations; the older generations' thresholds stay as they are."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
