"""The ``executor`` entry point: a quick dispatch before the service's imports.

``executor stats`` and ``executor orders`` are short-lived reporting commands; importing the
service (Trio, structlog, the fire path) first cost them ~0.6 s of CPU on every run. Every other
command goes to ``executor.cli``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``executor`` and ``python -m executor``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["stats"]:
        from executor.stats.command import stats_main

        return stats_main(argv[1:])
    if argv[:1] == ["orders"]:
        from executor.stats.orders import orders_main

        return orders_main(argv[1:])
    from executor.cli import main as cli_main

    return cli_main(argv)
