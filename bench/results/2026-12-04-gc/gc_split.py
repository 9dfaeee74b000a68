"""Scratch: ../2026-12-02-floor/cpu_split.py (CPU per thread, one connection flat out for 3 s)
over this folder's variants, with each run's GCSTATS line printed under it.

Run from the repository root with PYTHONPATH=. :

  gc_split.py ROUNDS NAME...   (PLACEMENTS=pinned to run one placement)

A NAME is ``trio``, ``cmd:COMMAND`` or ``gc_variants.py`` names joined with ``+``.
"""

import runpy
import sys
from pathlib import Path

from bench.harness import processes

HERE = Path(__file__).resolve().parent
resolve = processes.executor_spec
stop = processes.RunningExecutor.stop


def executor_spec(name: str) -> processes.ExecutorSpec:
    if name == "trio" or name.startswith("cmd:"):
        return resolve(name)
    return processes.ExecutorSpec(
        name, (sys.executable, str(HERE / "gc_variants.py"), name, "serve")
    )


def stop_and_report(self: processes.RunningExecutor) -> int:
    status = stop(self)
    if getattr(self, "gc_reported", False):
        return status
    self.gc_reported = True  # type: ignore[attr-defined]
    for line in (self.stderr_text or "").splitlines():
        if "GCSTATS" in line:
            print("   ", line[line.index("GCSTATS") :], flush=True)
    return status


processes.executor_spec = executor_spec
processes.RunningExecutor.stop = stop_and_report
runpy.run_path(str(HERE.parent / "2026-12-02-floor" / "cpu_split.py"), run_name="__main__")
