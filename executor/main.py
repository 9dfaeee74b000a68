"""The ``executor`` entry point: a quick dispatch before the service's imports.

``executor stats`` is a short-lived reporting command; importing the service (Trio, structlog,
the fire path) first cost it ~0.6 s of CPU on every run. Every other command goes to
``executor.cli``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``executor`` and ``python -m executor``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["stats"]:
        from executor.stats.command import stats_main

        return stats_main(argv[1:])
    from executor.cli import main as cli_main

    return cli_main(argv)
