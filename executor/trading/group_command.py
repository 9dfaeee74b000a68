"""``executor group reset --telemetry-db D``: resume after the exchange triggered the order group.

Parses the command line, loads the exchange's settings and key as ``executor serve`` does (the same
``KALSHI_*`` variables, or ``--env-file``), then runs
``executor.exchange.book.offline_reset.reset_on_exchange``. Exit status 0 when the group was reset,
1 for bad usage, a configuration that names no real exchange, or a reset that failed (one line on
stderr each).
"""

from __future__ import annotations

import sys
from pathlib import Path

from executor.config.variables import ConfigError
from executor.runtime.exit_codes import EXIT_FAILURE
from executor.trading.kill_command import (
    OfflineParser,
    add_exchange_source,
    parse_offline,
    real_exchange,
)


def _parser() -> OfflineParser:
    parser = OfflineParser(
        prog="executor group",
        description="Reset this installation's order group on the exchange (after the exchange "
        "triggered it: the executor serving the database is told, and sends again).",
    )
    parser.add_argument("command", choices=("reset",), metavar="reset")
    parser.add_argument(
        "--telemetry-db",
        type=Path,
        required=True,
        metavar="PATH",
        help="the executor's database (it records the order group)",
    )
    add_exchange_source(parser)
    return parser


def group_main(argv: list[str]) -> int:
    """``executor group reset --telemetry-db D [--env-file F] [--environment E]``."""
    parser = _parser()
    args = parse_offline(parser, argv)
    if isinstance(args, int):
        return args
    try:
        settings, signer = real_exchange(args, "the group is reset on the exchange")
    except ConfigError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    import trio  # the exchange's imports only once the command is known to be usable

    from executor import logs
    from executor.exchange.book.offline_reset import reset_on_exchange

    logs.start_logging("auto", "warning")
    try:
        return trio.run(reset_on_exchange, settings, signer, args.telemetry_db.expanduser())
    finally:
        logs.stop_logging()


__all__ = ["group_main"]
