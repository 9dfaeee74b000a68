"""The ``executor`` command line (placeholder until the service lands)."""

from __future__ import annotations

import argparse
import sys

from executor import __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``executor`` and ``python -m executor``."""
    parser = argparse.ArgumentParser(prog="executor")
    parser.add_argument("--version", action="version", version=f"executor {__version__}")
    parser.add_argument("command", nargs="?", default=None)
    args, _ = parser.parse_known_args(argv)
    print(f"executor: {args.command!r} is not available yet", file=sys.stderr)
    return 1
