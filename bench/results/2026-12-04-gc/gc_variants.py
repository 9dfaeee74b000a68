"""Scratch variants for the garbage collector (issue 24, 2026-12-04): run ``executor serve``
with the collector counted, frozen, re-tuned or left alone, as ``bench.experiments.variants`` does.

Run from the repository root with PYTHONPATH=. :

  gc_variants.py NAME[+NAME...] serve ARGS

- ``gc-stats``: count each generation's collections, the time spent in them and what they found
  (``gc.callbacks``); one ``GCSTATS`` line on stderr at exit, with the objects the collector
  tracks and how many are frozen.
- ``gc-python``: ``executor.runtime.gc_settings.settle_heap`` does nothing: the collector as the
  interpreter sets it (what ``--gc python`` does; the code before the change).
- ``gc-freeze``: ``gc.collect(); gc.freeze()`` before serving, thresholds left alone.
- ``gc-5k``, ``gc-50k``: the young threshold at 5,000 / 50,000 (nothing frozen).
- ``gc-off``: ``gc.disable()``.
- ``hold-8``: at most 8 shadow wakes held per connection (``MAX_DEFERRED_SHADOWS``; 256 ships).

Before the change ``serve`` ran with the interpreter's collector, so the scratch runs of this
date named ``trio`` are what ``gc-python`` is now, and ``gc-freeze+gc-5k`` is what ships.
"""

import atexit
import gc
import sys
import time
from collections.abc import Callable

from bench.experiments import variants


def gc_stats() -> None:
    counts = [0, 0, 0]
    spent_ns = [0, 0, 0]
    collected = [0, 0, 0]
    started = [0]

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter_ns()
            return
        generation = info["generation"]
        counts[generation] += 1
        spent_ns[generation] += time.perf_counter_ns() - started[0]
        collected[generation] += info["collected"]

    def report() -> None:
        spent_ms = [round(ns / 1e6, 1) for ns in spent_ns]
        sys.stderr.write(
            f"GCSTATS counts {counts} ms {spent_ms} collected {collected}"
            f" objects {len(gc.get_objects())} frozen {gc.get_freeze_count()}\n"
        )

    gc.callbacks.append(callback)
    atexit.register(report)


def gc_python() -> None:
    from executor import server

    server.settle_heap = lambda *args, **kwargs: None


def gc_freeze() -> None:
    gc.collect()
    gc.freeze()


def young_threshold(count: int) -> Callable[[], None]:
    def patch() -> None:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(count, middle, old)

    return patch


def hold_8() -> None:
    from executor.wire import handoff

    handoff.MAX_DEFERRED_SHADOWS = 8


variants.VARIANTS.update(
    {
        "gc-stats": gc_stats,
        "gc-python": gc_python,
        "gc-freeze": gc_freeze,
        "gc-5k": young_threshold(5_000),
        "gc-50k": young_threshold(50_000),
        "gc-off": gc.disable,
        "hold-8": hold_8,
    }
)
sys.exit(variants.main())
