"""``executor killswitch``: engage, release or inspect the kill switch file, from a shell, and
carry the kill to the exchange (``engage --telemetry-db D``).

The file itself is ``executor.runtime.kill_switch.KillSwitch``; this module is its command line
(:func:`killswitch_main`, also ``python -m executor.trading.kill_command``). The switch file
stops a running executor's real fires; it does nothing for an executor that was SIGKILLed, or
whose host is gone, while its good_till_canceled orders still rest on the book.
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
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

from executor.config.settings import Settings, load_settings
from executor.config.variables import ConfigError
from executor.runtime.exit_codes import EXIT_FAILURE, EXIT_OK
from executor.runtime.kill_switch import KillSwitch

if TYPE_CHECKING:
    from executor.signer import KalshiSigner

EXIT_ENGAGED: Final = 2
"""``status`` while the switch is engaged."""


class KillUsageError(Exception):
    """The exchange half of ``engage`` is misconfigured; the message is the one line printed."""


class ExchangeKillCommand:
    """The exchange half of ``executor killswitch engage`` (:func:`killswitch_main`)."""

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
        add_exchange_source(group)

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
            why = "--telemetry-db asks to cancel through the exchange"
            settings, signer = real_exchange(args, why)
        except ConfigError as error:
            raise KillUsageError(str(error)) from None
        return functools.partial(_run, settings, signer, db_path.expanduser())


def real_exchange(args: argparse.Namespace, why: str) -> tuple[Settings, KalshiSigner]:
    """The settings and key of the real exchange these flags and variables name.

    Raises:
        ConfigError: the configuration is wrong, or names no real exchange (``why`` says what
            needed one).
    """
    settings = load_settings(args, os.environ)
    if settings.exchange.mode != "real":
        raise ConfigError(
            f"{why}, but no exchange is configured (KALSHI_API_KEY_ID and "
            "KALSHI_PRIVATE_KEY_PATH, or --env-file)"
        )
    from executor.trading.exchange_side import load_signer

    return settings, load_signer(settings.exchange)


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


class _UsageError(Exception):
    """Bad command-line usage; the message is the one line printed."""


class OfflineParser(argparse.ArgumentParser):
    """The parser of the offline commands (``killswitch``, ``group``): bad usage is one line and
    exit 1 (for ``killswitch``, 2 would read as "engaged" to a script checking status)."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def add_exchange_source(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The flags that name the exchange and its credentials beside the ``KALSHI_*`` variables,
    as ``executor serve`` takes them."""
    parser.add_argument("--env-file", type=Path, default=None, metavar="PATH")
    parser.add_argument("--environment", choices=("demo", "prod"), default=None)
    parser.add_argument("--exchange-ca-file", type=Path, default=None, metavar="PATH")


def parse_offline(
    parser: OfflineParser, argv: list[str], *, intermixed: bool = False
) -> argparse.Namespace | int:
    """``argv`` parsed, or the exit status when it is bad usage (one line printed, 1) or
    ``--help`` (its own status, 0)."""
    try:
        if intermixed:
            return parser.parse_intermixed_args(argv)
        return parser.parse_args(argv)
    except _UsageError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except SystemExit as leaving:  # --help
        return EXIT_OK if leaving.code is None else int(leaving.code)


def _parser() -> OfflineParser:
    parser = OfflineParser(
        prog="executor killswitch",
        description=(
            "Engage, release or inspect the executor's kill switch file. status exits 2 while "
            "engaged, 0 when released; bad usage and failures exit 1."
        ),
    )
    parser.add_argument(
        "--kill-switch",
        required=True,
        metavar="PATH",
        help="the switch file (the same path given to `executor serve --kill-switch`)",
    )
    # Both optional to argparse, so a missing command is reported in words below rather than as
    # "the following arguments are required: ..., reason" (a reason is never required).
    parser.add_argument("command", metavar="{engage,release,status}", nargs="?")
    parser.add_argument(
        "reason",
        metavar="REASON",
        nargs="*",
        default=[],
        help="engage only: the reason, words joined by spaces",
    )
    return parser


def killswitch_main(argv: list[str], exchange: ExchangeKillCommand | None = None) -> int:
    """``executor killswitch [--kill-switch PATH] {engage [REASON...] | release | status}``.

    ``--kill-switch`` is required: the server has no default switch path either, and a default here
    could engage a file no executor watches. With ``exchange`` (the command line's), ``engage``
    can also cancel through the exchange (:class:`ExchangeKillCommand`).

    Returns:
        The exit status: 0 done (or released, for ``status``), 2 engaged (``status`` only), 1 for
        bad usage, an unknown command or a file-system error, in which case nothing was changed
        and one line went to stderr; 1 too when the switch was engaged but the exchange half failed
        (its lines say so).
    """
    parser = _parser()
    if exchange is not None:
        exchange.add_arguments(parser)
    args = parse_offline(parser, argv, intermixed=True)
    if isinstance(args, int):
        return args
    command: str | None = args.command
    words: list[str] = args.reason
    if command is None:
        print(f"{parser.prog}: a command is required: engage, release or status", file=sys.stderr)
        return EXIT_FAILURE
    if command not in ("engage", "release", "status"):
        print(
            f"{parser.prog}: unknown command {command!r} (expected engage, release or status)",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if words and command != "engage":
        print(f"{parser.prog}: {command} takes no arguments, got {words!r}", file=sys.stderr)
        return EXIT_FAILURE
    after_engage = None
    if exchange is not None and exchange.asked(args):
        if command != "engage":
            print(f"{parser.prog}: only engage acts on the exchange", file=sys.stderr)
            return EXIT_FAILURE
        try:
            after_engage = exchange.prepare(args)
        except KillUsageError as error:
            print(f"{parser.prog}: {error}", file=sys.stderr)
            return EXIT_FAILURE
    switch = KillSwitch(args.kill_switch, ttl_s=0)
    try:
        if command == "engage":
            switch.engage(" ".join(words))
        elif command == "release":
            was_engaged = switch.release()
            print("released" if was_engaged else "released (was not engaged)")
            return EXIT_OK
    except OSError as error:
        print(
            f"{parser.prog}: cannot {command} {switch.path}: {error.strerror or error}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    reason = switch.engaged_reason()
    if reason is None:
        print("released")
        return EXIT_OK
    print(f"engaged: {reason}", flush=True)
    if after_engage is not None:
        return after_engage(reason)
    return EXIT_ENGAGED if command == "status" else EXIT_OK


__all__ = [
    "EXIT_ENGAGED",
    "ExchangeKillCommand",
    "KillUsageError",
    "killswitch_main",
    "real_exchange",
]


if __name__ == "__main__":
    sys.exit(killswitch_main(sys.argv[1:]))
