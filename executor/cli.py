"""The ``executor`` command line: serve, killswitch, group, stats, orders and ``--version``."""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
from pathlib import Path

import structlog
import trio

from executor import __version__, logs
from executor.config.settings import Settings, add_exchange_arguments, load_settings
from executor.config.variables import ConfigError, StartupError
from executor.fire.path import DEFAULT_CONTRACT_COUNT, FirePath
from executor.recording.counting.metrics import DEFAULT_HOST as METRICS_DEFAULT_HOST
from executor.recording.counting.metrics import MetricsSetupError, parse_metrics_address
from executor.recording.schema import default_telemetry_db
from executor.runtime.exit_codes import EXIT_FAILURE, EXIT_USAGE
from executor.runtime.gc_settings import GC_MODES, YOUNG_THRESHOLD
from executor.runtime.kill_switch import DEFAULT_TTL_S, KillSwitch
from executor.runtime.notify import EXIT_FLUSH_S, ServiceNotifier
from executor.runtime.placement import (
    Placement,
    PlacementError,
    allowed_cpus,
    apply_placement,
    parse_cpus,
)
from executor.runtime.signals import GROUP_RESET_SIGNAL
from executor.runtime.thread_priority import LOW_NICE, WRITER_PRIORITIES
from executor.runtime.usage import OneLineParser, flag_type, positive_int, seconds
from executor.server import DEFAULT_GRACE_S, ExecutorServer, ServerConfig, SocketSetupError
from executor.telemetry import BATCH_LINGER_S, CHANNEL_CAPACITY, TelemetryOpenError
from executor.wire.socket_access import (
    DEFAULT_SOCKET_MODE,
    SocketAccessError,
    parse_socket_mode,
    resolve_socket_group,
    socket_access,
)
from executor.wire.unixsocket import SocketPathError

LOG_LEVELS = ("debug", "info", "warning", "error")


def exit_status(error: Exception) -> int:
    """The exit status a start-up error ends the process with (the one rule, in one place)."""
    return EXIT_USAGE if isinstance(error, (ConfigError, SocketPathError)) else EXIT_FAILURE


def _metrics_address(text: str) -> tuple[str, int]:
    try:
        return parse_metrics_address(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"expected HOST:PORT or PORT (e.g. 127.0.0.1:9464), got {text!r}: {error}"
        ) from None


def _socket_path(text: str) -> Path:
    # Checked on the text: Path("") is "." and Path("run/") is "run", a different file.
    if not text or text.endswith("/"):
        raise argparse.ArgumentTypeError(
            f"must name a socket file, not a directory, got {text!r} (e.g. /tmp/executor.sock)"
        )
    return Path(text)


_cpus = flag_type(parse_cpus, PlacementError)
_socket_mode = flag_type(parse_socket_mode, SocketAccessError)
_socket_group = flag_type(resolve_socket_group, SocketAccessError)


def build_parser() -> argparse.ArgumentParser:
    """The ``executor`` argument parser (``killswitch`` arguments are parsed by its own module)."""
    parser = OneLineParser(
        prog="executor",
        description="The trio-executor order executor: receives wakes on a Unix socket, acks them, "
        "records their latency in SQLite, and fires.",
    )
    parser.add_argument("--version", action="version", version=f"executor {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the executor until SIGINT/SIGTERM",
        description="Serve wakes on --socket until SIGINT or SIGTERM, then shut down in order and "
        "print the counters to stderr.",
    )
    serve.add_argument(
        "--socket", required=True, type=_socket_path, help="Unix socket path to listen on"
    )
    serve.add_argument(
        "--socket-mode",
        type=_socket_mode,
        default=DEFAULT_SOCKET_MODE,
        metavar="MODE",
        help=f"the socket's permission bits, octal (default {DEFAULT_SOCKET_MODE:04o}: the "
        "executor's user only; 0660 lets a group connect; other users never can)",
    )
    serve.add_argument(
        "--socket-group",
        type=_socket_group,
        default=None,
        metavar="GROUP",
        help="give the socket to this group (a name or number this process is a member of), "
        "so a poller running as another user in it can connect with --socket-mode 0660",
    )
    serve.add_argument(
        "--telemetry-db",
        type=Path,
        default=None,
        help=f"SQLite file for latency rows (default: {default_telemetry_db()})",
    )
    serve.add_argument(
        "--kill-switch", type=Path, default=None, help="kill-switch file (none without it)"
    )
    serve.add_argument(
        "--kill-switch-ttl",
        type=seconds,
        default=DEFAULT_TTL_S,
        help=f"seconds a kill-switch reading is cached, 0 = none (default {DEFAULT_TTL_S})",
    )
    serve.add_argument(
        "--contract-count",
        type=positive_int,
        default=None,
        help="the fixed contracts per order: shadow fires, fires without an exchange, and the "
        "floor of sizing (default KALSHI_FIXED_ORDER_CONTRACT_COUNT, else "
        f"{DEFAULT_CONTRACT_COUNT})",
    )
    serve.add_argument(
        "--grace",
        type=seconds,
        default=DEFAULT_GRACE_S,
        help=f"seconds in-flight work may run after a signal (default {DEFAULT_GRACE_S})",
    )
    serve.add_argument(
        "--telemetry-capacity",
        type=positive_int,
        default=CHANNEL_CAPACITY,
        help=f"rows the telemetry channel holds before dropping (default {CHANNEL_CAPACITY})",
    )
    serve.add_argument(
        "--telemetry-linger",
        type=seconds,
        default=BATCH_LINGER_S,
        help="seconds the writer waits after a batch's first row to gather more; 0 commits "
        f"what is queued at once (default {BATCH_LINGER_S})",
    )
    serve.add_argument(
        "--writer-priority",
        choices=WRITER_PRIORITIES,
        default="yield",
        help="how the telemetry writer thread leaves the event loop its CPU; yield: it writes "
        "in slices and waits while the loop's thread is runnable, as long as few rows are "
        f"queued; low: it runs at a nice value {LOW_NICE} above the process's; idle: under "
        "SCHED_IDLE (low and idle only where it may use more than one CPU: fewer rows/s flat "
        "out); normal: none of these (default yield)",
    )
    serve.add_argument(
        "--read-between-batches",
        action="store_true",
        help="while working through the frames of one read, take what the kernel holds before "
        "every batch, even when the telemetry writer has fallen behind (by default only while "
        "it keeps up: a burst, not a flood; fewer rows/s flat out)",
    )
    serve.add_argument(
        "--frame-spans",
        action="store_true",
        help="also record each accepted frame's own span (stage wake_frame: its read stamp to "
        "its own ack encoded, without the later frames its ack was joined with, nor the send) "
        "beside wake_recv; a second row per frame, for measuring",
    )
    serve.add_argument(
        "--gc",
        choices=GC_MODES,
        default="tuned",
        help="tuned: once started, freeze the start-up heap and collect young objects every "
        f"{YOUNG_THRESHOLD} allocations instead of 700 (2000 since Python 3.13), so collections "
        "seldom pause the loop; "
        "python: leave the garbage collector as the interpreter sets it (default tuned)",
    )
    serve.add_argument(
        "--cpu",
        type=_cpus,
        default=None,
        metavar="CPUS",
        help="pin the event-loop thread to these CPUs (1, 0,2, 0-1: as taskset -c takes them) "
        "and keep the executor's other threads and worker processes off them (where any other "
        "CPU is allowed); default: no pinning",
    )
    serve.add_argument(
        "--keep-warm",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="after this long without a real wake, rehearse the last one (decided and its order "
        "built again, nothing sent or recorded) so the order path stays in the CPU's caches; "
        "for an executor on a CPU of its own (--cpu), as unpinned it measured slower "
        "(default 0: off)",
    )
    serve.add_argument(
        "--log-format",
        choices=("auto", "console", "json"),
        default="auto",
        help="console on a terminal, JSON lines otherwise (default auto)",
    )
    serve.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="default info")
    add_exchange_arguments(serve)
    serve.add_argument(
        "--log-queue-records",
        type=positive_int,
        default=logs.LOG_QUEUE_RECORDS,
        help="log records waiting for the stderr writer before new ones are dropped and counted "
        f"as log_dropped (default {logs.LOG_QUEUE_RECORDS})",
    )
    serve.add_argument(
        "--metrics",
        type=_metrics_address,
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (PORT alone: on "
        f"{METRICS_DEFAULT_HOST}; port 0 picks a free one and logs it; default: off)",
    )
    commands.add_parser(
        "killswitch",
        help="engage, release or show the kill switch (see: executor killswitch --help)",
        add_help=False,
    )
    commands.add_parser(
        "group",
        help="reset the order group after the exchange triggered it (see: executor group --help)",
        add_help=False,
    )
    commands.add_parser(
        "stats",
        help="summarise a telemetry database, read-only (see: executor stats --help)",
        add_help=False,
    )
    commands.add_parser(
        "orders",
        help="list the recent orders, newest first, read-only (see: executor orders --help)",
        add_help=False,
    )
    return parser


def _serve(args: argparse.Namespace) -> int:
    try:
        access = socket_access(args.socket_mode, args.socket_group)
    except SocketAccessError as error:
        print(f"executor: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        settings = load_settings(args, os.environ)
        signer = None
        if settings.exchange.mode != "none":
            # Only an executor with an exchange pays for importing the order path (httpx & co.).
            from executor.trading.exchange_side import load_signer
            from executor.trading.factory import OrderPathFactory

            if settings.exchange.mode == "real":
                signer = load_signer(settings.exchange)
    except (ConfigError, StartupError) as error:
        print(f"executor: error: {error}", file=sys.stderr)
        return exit_status(error)
    placement = None
    if args.cpu is not None:
        # Before any thread starts (the log writer is next): this thread runs trio.run.
        placement = Placement.for_loop(args.cpu, allowed_cpus())
        try:
            apply_placement(placement)
        except PlacementError as error:
            print(f"executor: error: {error}", file=sys.stderr)
            return EXIT_USAGE
    logs.start_logging(args.log_format, args.log_level, queue_records=args.log_queue_records)
    if placement is not None:
        structlog.get_logger().info("cpu placement", **placement.describe())
    _warn_unknown_variables(settings)
    kill_switch = (
        KillSwitch(args.kill_switch, ttl_s=args.kill_switch_ttl) if args.kill_switch else None
    )
    telemetry_db = args.telemetry_db or default_telemetry_db()
    # Read (and removed from the environment) once logging runs: a bad address is logged.
    notifier = ServiceNotifier.from_environment(os.environ)
    order_path = None
    if settings.exchange.mode != "none":
        order_path = OrderPathFactory(
            settings,
            telemetry_db=telemetry_db,
            kill_switch=kill_switch,
            signer=signer,
            announce=notifier.status,
            socket_path=args.socket,
        )
    config = ServerConfig(
        socket_path=args.socket,
        telemetry_db=telemetry_db,
        fire_path=FirePath(
            kill_switch=kill_switch, contract_count=settings.sizing.fixed_contract_count
        ),
        grace_s=args.grace,
        telemetry_capacity=args.telemetry_capacity,
        telemetry_linger_s=args.telemetry_linger,
        order_path=order_path,
        metrics_address=args.metrics,
        notifier=notifier,
        socket_access=access,
        gc_mode=args.gc,
        writer_priority=args.writer_priority,
        read_between_batches=args.read_between_batches,
        frame_spans=args.frame_spans,
        keep_warm_s=args.keep_warm,
    )
    server = ExecutorServer(config)
    # From here on SIGINT/SIGTERM never kill the process: before the signal task listens (and
    # after it stops) they are only noted, and the task turns a noted signal into a shutdown.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda received, _frame: server.note_early_signal(received))
    # `executor group reset` may signal it any time: ignored until the order path listens.
    signal.signal(GROUP_RESET_SIGNAL, signal.SIG_IGN)
    startup_error: Exception | None = None
    try:
        trio.run(server.run)
    except (SocketSetupError, MetricsSetupError, TelemetryOpenError, StartupError) as error:
        startup_error = error
    finally:
        # A STOPPING=1 the manager has not taken yet goes out before the process ends.
        notifier.wait_sent(EXIT_FLUSH_S)
        # Queued log lines go out before the lines below, but for a bounded time only: a stalled
        # reader of stderr must not hold the exit forever (the prints below may then wait on it).
        logs.stop_logging()
    if startup_error is not None:
        print(f"executor: error: {startup_error}", file=sys.stderr)
        return exit_status(startup_error)
    print(server.statistics().exit_line(), file=sys.stderr)
    print(server.telemetry.statistics().exit_line(), file=sys.stderr)
    return 0


def _warn_unknown_variables(settings: Settings) -> None:
    """One warning per ``KALSHI_*`` name nothing reads: a typo must not pass silently."""
    log = structlog.get_logger()
    for unknown in settings.unknown_variables:
        log.warning(
            "unknown KALSHI_ variable, ignored",
            variable=unknown.name,
            source=unknown.source,
            did_you_mean=unknown.closest,
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``executor`` and ``python -m executor``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["killswitch"]:
        from executor.trading.kill_command import ExchangeKillCommand, killswitch_main

        return killswitch_main(argv[1:], ExchangeKillCommand())
    if argv[:1] == ["group"]:
        from executor.trading.group_command import group_main

        return group_main(argv[1:])
    if argv[:1] == ["stats"]:
        from executor.stats.command import stats_main  # only the stats command pays for its imports

        return stats_main(argv[1:])
    if argv[:1] == ["orders"]:
        from executor.stats.orders import orders_main

        return orders_main(argv[1:])
    parser = build_parser()
    _refuse_unknown_leading_option(parser, argv)
    args = parser.parse_args(argv)
    return _serve(args)


def _refuse_unknown_leading_option(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Name an unknown option given before any command (``executor --versoin``): argparse would
    only say that a command is required."""
    first = argv[0] if argv else ""
    if not first.startswith("-"):
        return
    known = [option for action in parser._actions for option in action.option_strings]
    name = first.split("=", 1)[0]
    if any(option.startswith(name) for option in known):
        return  # known, or an abbreviation argparse resolves (or calls ambiguous) itself
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    parser.error(f"unrecognized option {first!r} before the command{hint}")
