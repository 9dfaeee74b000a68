"""``executor killswitch engage --telemetry-db D``: the kill carried to the exchange, from a shell.

The switch file stops a running executor's real fires; it does nothing for an executor that was
SIGKILLed, or whose host is gone, while its good_till_canceled orders still rest on the book.
Given the telemetry database (and the exchange's credentials: the same ``KALSHI_*`` variables,
or ``--env-file``, as ``executor serve``), ``engage`` then also:

1. cancels every order the database says may still rest (``rests``: good_till_canceled, contracts
   remaining), with the V2 batch cancel, and commits each cancelled order's row (``canceled``,
   fill columns as the exchange says: ``executor.exchange.book.cancels``);
2. triggers the newest order group the database records for this exchange (the exchange cancels
   what of it still rests, orders the database never heard of included, and rejects its new
   orders until a reset; a running executor resets it when the switch is released).

Rows in flight when the executor died (``pending``, no exchange id) cannot be named by a cancel;
the group's trigger covers them, and the next start-up reconciles their rows. Lines on stdout say
what was done; a failure is one line on stderr and exit status 1 (the switch file stays engaged).
Without ``--telemetry-db`` the command only writes the file, as before.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from executor.config.settings import Settings, load_settings
from executor.config.variables import ConfigError
from executor.decide.killswitch import KillUsageError

if TYPE_CHECKING:
    from executor.signer import KalshiSigner


class ExchangeKillCommand:
    """The exchange half of ``executor killswitch engage`` (``executor.decide.killswitch``)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--telemetry-db`` (asks for the exchange half) and the exchange's own flags."""
        group = parser.add_argument_group("engage on the exchange (a dead executor's orders)")
        group.add_argument(
            "--telemetry-db",
            type=Path,
            default=None,
            metavar="PATH",
            help="the executor's database: engage also cancels its resting orders and triggers "
            "its order group on the exchange (needs the exchange's KALSHI_* credentials)",
        )
        group.add_argument("--env-file", type=Path, default=None, metavar="PATH")
        group.add_argument("--environment", choices=("demo", "prod"), default=None)
        group.add_argument("--exchange-ca-file", type=Path, default=None, metavar="PATH")

    def asked(self, args: argparse.Namespace) -> bool:
        """Whether ``--telemetry-db`` was given."""
        return args.telemetry_db is not None

    def prepare(self, args: argparse.Namespace) -> Callable[[str], int] | None:
        """The exchange half for these flags, or None without ``--telemetry-db``.

        Raises:
            KillUsageError: the configuration is wrong, or names no real exchange.
        """
        db_path: Path | None = args.telemetry_db
        if db_path is None:
            return None
        try:
            settings = load_settings(args, os.environ)
            if settings.exchange.mode != "real":
                raise ConfigError(
                    "--telemetry-db asks to cancel through the exchange, but no exchange is "
                    "configured (KALSHI_API_KEY_ID and KALSHI_PRIVATE_KEY_PATH, or --env-file)"
                )
            from executor.trading.exchange_side import load_signer

            signer = load_signer(settings.exchange)
        except ConfigError as error:
            raise KillUsageError(str(error)) from None
        return functools.partial(_run, settings, signer, db_path.expanduser())


def _run(settings: Settings, signer: KalshiSigner, db_path: Path, reason: str) -> int:
    """Run the exchange half with logging on stderr (warnings and up); the exit status."""
    import trio  # the exchange half's imports (trio, httpx & co.) only when it is asked for

    from executor import logs
    from executor.exchange.book.offline_kill import engage_on_exchange

    logs.start_logging("auto", "warning")
    try:
        return trio.run(engage_on_exchange, settings, signer, db_path, reason)
    finally:
        logs.stop_logging()


__all__ = ["ExchangeKillCommand"]
