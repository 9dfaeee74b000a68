"""Percentiles exactly as the reference harness computes them.

The function lives in the installed package (``executor stats`` uses it too); the benchmark, which
is not installed, re-exports it so every percentile in the project comes from one definition.
"""

from __future__ import annotations

from executor.stats.percentile import percentile

__all__ = ["percentile"]
