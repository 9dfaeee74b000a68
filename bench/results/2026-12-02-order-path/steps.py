"""Median and p90 of each step in a ``timed_begin.py`` output file (2026-12-02, RESULTS.md)."""

from __future__ import annotations

import sys


def main(path: str) -> None:
    with open(path, encoding="ascii") as source:
        lines = [line.split() for line in source if line.strip()]
    header = lines[0]
    rows = [line for line in lines if line != header]  # each process writes the header once
    print(f"{len(rows)} orders")
    for column, name in enumerate(header):
        values = sorted(int(row[column]) for row in rows)
        p50, p90 = values[len(values) // 2], values[int(len(values) * 0.9)]
        print(f"{name:14s} p50 {p50 / 1e3:7.1f} us  p90 {p90 / 1e3:7.1f} us")


if __name__ == "__main__":
    main(sys.argv[1])
