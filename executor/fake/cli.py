"""``python -m executor.fake``: the fake exchange as a command (DISPATCH.md §9).

Generates credentials into a directory, serves until SIGINT or SIGTERM (exit 0), and prints one
JSON line once serving: ``base_url``, ``stream_url`` (its WebSocket stream, on the same port: an
executor playing against it sets ``KALSHI_DEMO_WS_URL`` to it, or it dials the real demo stream),
``key_id``, ``private_key_path``, ``ca_file``. A busy port or
an unwritable directory is one line on stderr and exit 1; a bad flag (a port out of range, a
negative balance) one line and exit 2.

Without ``--dir`` the credentials go to a fresh temporary directory, which is removed when the
command ends, however it ends (a signal, a busy port): a throwaway private key must not outlive
the fake that trusts it (after a SIGKILL, the next start removes it: ``executor.fake.scratch``).
A ``--dir`` given by the caller is the caller's and is left as it is.

``--fault`` queues faults for the first order requests (``hang-after-place``: placed, never
answered), so a fake that outlives the executor can hold an order's answer while the executor
is killed. ``--listing-lag-s`` makes the orders endpoints (and the user data timestamp) lag the
book by that many seconds, as Kalshi's may.

Pauses (``executor.fake.book.control.ExchangePauses``): ``--pause trading`` or ``--pause
exchange`` starts paused, ``--weekly-pause`` follows the published Thursday 03:00-05:00 ET
trading pause, and SIGUSR1 sent to the running fake toggles a trading pause (``kill -USR1 PID``:
paused, then resumed), each toggle one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import signal
import sys
from pathlib import Path

import structlog
import trio

from executor.fake.exchange import (
    DEFAULT_BALANCE_CENTS,
    FakeCredentials,
    Fault,
    always_fill,
    never_fill,
    serve_fake_exchange,
)
from executor.fake.scratch import COMMAND_PREFIX, scratch_folder
from executor.fake.stream import STREAM_PATH

log = structlog.get_logger()

MAX_LISTING_LAG_S = 3600.0
"""Largest ``--listing-lag-s``: an hour behind is already an exchange outage, not a lag."""

FAULTS = {
    "hang": Fault("hang"),
    "drop": Fault("drop"),
    "hang-after-place": Fault("hang", place=True),
    "drop-after-place": Fault("drop", place=True),
}
"""``--fault`` names: each queues one fault for the next order request. ``*-after-place`` place
the order first, then never answer (hang) or close the connection (drop): the outcome a client
cannot know without asking the exchange."""


async def _run_command(credentials: FakeCredentials, args: argparse.Namespace) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGUSR1) as signals:
        async with trio.open_nursery() as nursery:
            exchange = await nursery.start(
                functools.partial(
                    serve_fake_exchange,
                    credentials,
                    host=args.host,
                    port=args.port,
                    balance_cents=args.balance_cents,
                    fill_rule=never_fill if args.fill_rule == "kill" else always_fill,
                    listing_lag_s=args.listing_lag_s,
                )
            )
            exchange.inject(*(FAULTS[name] for name in args.fault))
            exchange.pauses.weekly = args.weekly_pause
            exchange.set_pause(args.pause)
            line = json.dumps(
                {
                    "base_url": exchange.base_url,
                    "stream_url": stream_url(exchange.base_url),
                    "key_id": credentials.key_id,
                    "private_key_path": str(credentials.private_key_path),
                    "ca_file": str(credentials.ca_file),
                }
            )
            await trio.to_thread.run_sync(lambda: print(line, flush=True))
            async for signum in signals:
                if signum == signal.SIGUSR1:
                    paused = exchange.pauses.kind == "trading"
                    exchange.set_pause(None if paused else "trading")
                    log.warning("fake exchange: trading " + ("resumed" if paused else "paused"))
                    continue
                nursery.cancel_scope.cancel()
                break


def stream_url(base_url: str) -> str:
    """The fake's stream URL: ``wss://`` on the REST base URL's host and port."""
    return "wss://" + base_url.removeprefix("https://").rstrip("/") + STREAM_PATH


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def _balance_cents(text: str) -> int:
    try:
        cents = int(text)
    except ValueError:
        cents = -1
    if cents < 0:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of cents, 0 or more, got {text!r}"
        )
    return cents


def _lag_s(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_LISTING_LAG_S:
        raise argparse.ArgumentTypeError(
            f"must be seconds from 0 to {MAX_LISTING_LAG_S:g}, got {text!r}"
        )
    return seconds


def main(argv: list[str] | None = None) -> int:
    """``python -m executor.fake``: serve until SIGINT/SIGTERM; 0 on a clean stop."""
    parser = argparse.ArgumentParser(
        prog="python -m executor.fake", description="A local fake Kalshi exchange."
    )
    parser.add_argument("--port", type=_port, required=True, help="TCP port (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--dir", type=Path, help="where to write the credentials (default: temp)")
    parser.add_argument(
        "--balance-cents",
        type=_balance_cents,
        default=DEFAULT_BALANCE_CENTS,
        help=f"the account's starting balance in cents (default {DEFAULT_BALANCE_CENTS})",
    )
    parser.add_argument("--fill-rule", choices=("fill", "kill"), default="fill")
    parser.add_argument(
        "--fault",
        choices=sorted(FAULTS),
        action="append",
        default=[],
        help="queue a fault for the next order request (repeatable; consumed in order)",
    )
    parser.add_argument(
        "--listing-lag-s",
        type=_lag_s,
        default=0.0,
        help="list orders (and date the user data timestamp) this many seconds late (default 0)",
    )
    parser.add_argument(
        "--pause",
        choices=("trading", "exchange"),
        default=None,
        help="start paused: no orders placed (trading), or nothing at all (exchange); "
        "SIGUSR1 toggles a trading pause while it runs",
    )
    parser.add_argument(
        "--weekly-pause",
        action="store_true",
        help="pause trading every Thursday 03:00-05:00 ET, as Kalshi's maintenance window",
    )
    args = parser.parse_args(argv)
    # stdout carries the one JSON line a caller parses; anything the fake logs goes to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        with contextlib.ExitStack() as stack:
            directory: Path = args.dir
            if directory is None:
                directory = stack.enter_context(scratch_folder(COMMAND_PREFIX))
            credentials = FakeCredentials.generate(directory)
            trio.run(_run_command, credentials, args)
    except KeyboardInterrupt:  # a SIGINT before the signal receiver was installed
        return 0
    except (OSError, BaseExceptionGroup) as error:
        cause = _os_error(error)
        if cause is None:
            raise
        print(f"fake exchange: {cause}", file=sys.stderr)
        return 1
    return 0


def _os_error(error: BaseException) -> OSError | None:
    """The OSError behind ``error`` (a nursery wraps it in a group), if that is all it is."""
    if isinstance(error, OSError):
        return error
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _os_error(error.exceptions[0])
    return None
