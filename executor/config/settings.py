"""Configuration of the order path: the settings, read once at start-up from flags and variables.

Sources, strongest first: the command line (the few values an operator sets per run), the process
environment, then the ``--env-file`` (the variables and their checked reads are
``executor.config.variables``'s). Every value is checked here, once, at start-up: a bad one is a
:class:`~executor.config.variables.ConfigError` whose text is one line naming the variable. The
``KALSHI_*`` names nothing reads come back in ``Settings.unknown_variables``.

Which exchange the executor talks to (DISPATCH.md, "three exchange modes"):

- ``--exchange fake``: the bundled fake exchange, started in-process with throwaway credentials;
- otherwise, a key id and a private key configured: the real exchange of ``KALSHI_ENVIRONMENT``
  (``demo`` unless told otherwise; ``prod`` only with ``KALSHI_ALLOW_PRODUCTION_ORDERS``);
- otherwise (or ``--exchange none``): nothing is sent; fires are decided and counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import ssl
import stat
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, cast

from executor.config.book import BookSettings, add_book_arguments, book_settings
from executor.config.risk_limits import RISK_ENV_VARS, RiskLimits
from executor.config.sizing import SizingConfig
from executor.config.variables import (
    ConfigError,
    UnknownVariable,
    Variables,
    read_env_file,
    unknown_variables,
)

ExchangeMode = Literal["none", "fake", "real"]
Environment = Literal["demo", "prod"]
ShadowSigning = Literal["process", "loop"]

DEMO_BASE_URL: Final = "https://external-api.demo.kalshi.co"
"""The demo exchange (Kalshi's recommended host for API traders), used when no URL is set."""

PROD_BASE_URL: Final = "https://external-api.kalshi.com"
"""The production exchange; reached only with ``KALSHI_ALLOW_PRODUCTION_ORDERS`` true."""

DEMO_STREAM_URL: Final = "wss://external-api-ws.demo.kalshi.co/trade-api/ws/v2"
"""The demo exchange's WebSocket API (Kalshi's quick start), used when no URL is set."""

PROD_STREAM_URL: Final = "wss://external-api-ws.kalshi.com/trade-api/ws/v2"
"""The production exchange's WebSocket API (the published AsyncAPI's server)."""

TIME_IN_FORCE_CHOICES: Final = ("fill_or_kill", "good_till_canceled", "immediate_or_cancel")
SELF_TRADE_PREVENTION_CHOICES: Final = ("taker_at_cross", "maker")

DEFAULT_PRESIGN_MAX_AGE_MS: Final = 100
"""Oldest a signature made ahead may be when an order uses it (ms; DISPATCH.md §10): well inside
any exchange's timestamp window (the fake's is 5 s), and short enough that an order's timestamp
still says when it left to within a tenth of a second."""
MAX_PRESIGN_MAX_AGE_MS: Final = 2000
"""Largest ``--presign-max-age-ms`` accepted (ms): the exchange checks the timestamp's freshness
in a window this project does not know precisely; beyond 2 s an order would risk a 401."""

ALLOW_READABLE_KEY_ENV: Final = "KALSHI_ALLOW_READABLE_PRIVATE_KEY"
"""True: use a private key file that group or others may read (a key on a shared read-only
mount, or a group that must read it); the default refuses it at start-up."""

PRIVATE_KEY_FORBIDDEN_BITS: Final = 0o077
"""Permission bits a private key file may not have: any for group or others (ssh's rule)."""

FAKE_FUNDED_EXCHANGE_INDEXES: Final = frozenset({0})
"""The fake exchange's one funded shard: the allowed set when the variable is unset in fake mode."""


@dataclass(frozen=True, slots=True)
class ExchangeSettings:
    """Where orders go and how they are signed and shaped."""

    mode: ExchangeMode
    environment: Environment = "demo"
    base_url: str | None = None
    key_id: str = ""
    private_key_path: Path | None = None
    ca_file: Path | None = None
    allow_production: bool = False
    time_in_force: str = "fill_or_kill"
    self_trade_prevention_type: str = "taker_at_cross"
    shadow_signing: ShadowSigning = "process"
    presign_max_age_ms: int = DEFAULT_PRESIGN_MAX_AGE_MS
    stream: bool = True
    """``--stream``: keep the exchange's WebSocket stream of fills and order updates."""
    stream_url: str | None = None
    """The stream's ``wss://`` URL; None: on the base URL's host (the fake serves both)."""
    book: BookSettings = dataclasses.field(default_factory=BookSettings)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the order path is configured with."""

    exchange: ExchangeSettings
    sizing: SizingConfig
    risk_enabled: bool
    risk_limits: RiskLimits
    allowed_exchange_indexes: frozenset[int]
    unknown_variables: tuple[UnknownVariable, ...] = ()


def add_exchange_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the order-path flags to ``executor serve``'s parser."""
    group = parser.add_argument_group(
        "order path (see docs/operations/configuration.md for every KALSHI_* variable)"
    )
    group.add_argument(
        "--exchange",
        choices=("auto", "fake", "none"),
        default="auto",
        help="fake: start the bundled fake exchange in-process; none: send nothing; auto "
        "(default): the real exchange when a key id and private key are configured, else none",
    )
    group.add_argument(
        "--env-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="a .env file of KALSHI_* variables (the process environment wins over it)",
    )
    group.add_argument(
        "--exchange-ca-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="PEM file of CAs to verify the exchange's TLS certificate with "
        "(KALSHI_CA_FILE; default: the system trust store)",
    )
    group.add_argument(
        "--shadow-signing",
        choices=("process", "loop"),
        default="process",
        help="where shadow fires are signed: process (default: a worker process, so a signature "
        "never holds the event loop) or loop (on the event loop, as real fires are)",
    )
    group.add_argument(
        "--presign-max-age-ms",
        type=_presign_max_age_ms,
        default=DEFAULT_PRESIGN_MAX_AGE_MS,
        metavar="MS",
        help="sign orders ahead in a worker process; an order uses a signature at most MS old "
        f"or signs inline (default {DEFAULT_PRESIGN_MAX_AGE_MS}; 0: always sign inline; "
        f"at most {MAX_PRESIGN_MAX_AGE_MS})",
    )
    group.add_argument(
        "--stream",
        choices=("on", "off"),
        default="on",
        help="on (default): follow fills and order updates on the exchange's WebSocket stream "
        "(KALSHI_DEMO_WS_URL / KALSHI_PROD_WS_URL), the account poll covering it while it is "
        "down; off: the account poll alone follows resting orders",
    )
    add_book_arguments(group)
    group.add_argument(
        "--environment",
        choices=("demo", "prod"),
        default=None,
        help="exchange environment (KALSHI_ENVIRONMENT; default demo)",
    )


def _presign_max_age_ms(text: str) -> int:
    """``--presign-max-age-ms``: an integer in [0, MAX_PRESIGN_MAX_AGE_MS]."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of ms") from None
    if not 0 <= value <= MAX_PRESIGN_MAX_AGE_MS:
        raise argparse.ArgumentTypeError(f"{value} is outside 0-{MAX_PRESIGN_MAX_AGE_MS} ms")
    return value


def load_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Read and check the configuration; ``args`` are ``executor serve``'s parsed flags.

    Raises:
        ConfigError: a value is malformed, missing, or the combination is unsafe.
    """
    env_file = getattr(args, "env_file", None)
    from_file = read_env_file(env_file.expanduser()) if env_file is not None else {}
    values = Variables({**from_file, **environ})
    environment = cast(
        Environment,
        getattr(args, "environment", None)
        or values.choice("KALSHI_ENVIRONMENT", ("demo", "prod"), "demo"),
    )
    mode = _exchange_mode(getattr(args, "exchange", "auto"), values, environment)
    exchange = _exchange_settings(
        mode,
        environment,
        values,
        getattr(args, "exchange_ca_file", None),
        cast(ShadowSigning, getattr(args, "shadow_signing", "process")),
        int(getattr(args, "presign_max_age_ms", DEFAULT_PRESIGN_MAX_AGE_MS)),
        (
            getattr(args, "cancel_resting_on_engage", None),
            bool(getattr(args, "cancel_resting_on_exit", False)),
        ),
    )
    fixed_count = values.number("KALSHI_FIXED_ORDER_CONTRACT_COUNT", int, 1, minimum=1)
    contract_count = getattr(args, "contract_count", None)
    sizing = SizingConfig(
        fixed_contract_count=contract_count if contract_count is not None else fixed_count,
        kelly_fraction=values.number("KALSHI_KELLY_FRACTION", float, 0.15, minimum=0.0),
        max_position_pct_of_balance=values.number(
            "KALSHI_MAX_POSITION_PCT_OF_BALANCE", float, 0.02, minimum=0.0, maximum=1.0
        ),
    )
    risk_enabled = values.flag("KALSHI_RISK_GATE_ENABLED", default=True)
    allowed = values.indexes("KALSHI_ALLOWED_EXCHANGE_INDEXES")
    if allowed is None:
        allowed = FAKE_FUNDED_EXCHANGE_INDEXES if mode == "fake" else frozenset()
    if mode == "real" and risk_enabled and not allowed:
        raise ConfigError(
            "KALSHI_ALLOWED_EXCHANGE_INDEXES is empty: with the risk gate enabled the executor "
            "will not trade against a real exchange without knowing which shards are funded "
            "(set it, e.g. KALSHI_ALLOWED_EXCHANGE_INDEXES=0)"
        )
    exchange = dataclasses.replace(
        exchange,
        stream=getattr(args, "stream", "on") == "on",
        stream_url=_stream_url(values, environment) if mode == "real" else None,
    )
    return Settings(
        exchange=exchange,
        sizing=sizing,
        risk_enabled=risk_enabled,
        risk_limits=_risk_limits(values),
        allowed_exchange_indexes=allowed,
        unknown_variables=unknown_variables(from_file, environ, env_file),
    )


def _exchange_mode(requested: str, values: Variables, environment: Environment) -> ExchangeMode:
    if requested in ("fake", "none"):
        return "fake" if requested == "fake" else "none"
    key_id_name, key_path_name = _credential_names(values, environment)
    has_id, has_key = bool(values.get(key_id_name)), bool(values.get(key_path_name))
    if has_id != has_key:
        present, missing = (key_id_name, key_path_name) if has_id else (key_path_name, key_id_name)
        raise ConfigError(f"{present} is set but {missing} is not: both are needed to trade")
    return "real" if has_id else "none"


def _credential_names(values: Variables, environment: Environment) -> tuple[str, str]:
    """The key id and key path variables in force: the per-environment ones when set."""
    prefix = f"KALSHI_{environment.upper()}_"
    key_id = f"{prefix}API_KEY_ID" if values.get(f"{prefix}API_KEY_ID") else "KALSHI_API_KEY_ID"
    key_path = (
        f"{prefix}PRIVATE_KEY_PATH"
        if values.get(f"{prefix}PRIVATE_KEY_PATH")
        else "KALSHI_PRIVATE_KEY_PATH"
    )
    return key_id, key_path


def _exchange_settings(
    mode: ExchangeMode,
    environment: Environment,
    values: Variables,
    ca_flag: Path | None,
    shadow_signing: ShadowSigning = "process",
    presign_max_age_ms: int = DEFAULT_PRESIGN_MAX_AGE_MS,
    book_flags: tuple[bool | None, bool] = (None, False),
) -> ExchangeSettings:
    allow_production = values.flag("KALSHI_ALLOW_PRODUCTION_ORDERS", default=False)
    time_in_force = values.choice(
        "KALSHI_ORDER_TIME_IN_FORCE", TIME_IN_FORCE_CHOICES, "fill_or_kill"
    )
    book = book_settings(values, book_flags)
    self_trade = values.choice(
        "KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE", SELF_TRADE_PREVENTION_CHOICES, "taker_at_cross"
    )
    ca_file = ca_flag.expanduser() if ca_flag is not None else values.path("KALSHI_CA_FILE")
    if ca_file is not None:
        _check_ca_file("--exchange-ca-file" if ca_flag else "KALSHI_CA_FILE", ca_file)
    if mode != "real":
        return ExchangeSettings(
            mode=mode,
            environment=environment,
            ca_file=ca_file,
            allow_production=allow_production,
            time_in_force=time_in_force,
            self_trade_prevention_type=self_trade,
            shadow_signing=shadow_signing,
            presign_max_age_ms=presign_max_age_ms,
            book=book,
        )
    if environment == "prod" and not allow_production:
        raise ConfigError(
            "KALSHI_ENVIRONMENT is prod but KALSHI_ALLOW_PRODUCTION_ORDERS is not true: "
            "refusing to start against the production exchange"
        )
    key_id_name, key_path_name = _credential_names(values, environment)
    key_path = values.path(key_path_name)
    assert key_path is not None  # the mode is real only when it is set
    if not key_path.is_file():
        problem = "not a regular file" if key_path.exists() else "no such file"
        raise ConfigError(f"{key_path_name} {key_path}: {problem}")
    if not values.flag(ALLOW_READABLE_KEY_ENV, default=False):
        _check_key_is_private(key_path_name, key_path)
    url_name = f"KALSHI_{environment.upper()}_BASE_URL"
    default_url = DEMO_BASE_URL if environment == "demo" else PROD_BASE_URL
    return ExchangeSettings(
        mode="real",
        environment=environment,
        base_url=_base_url(url_name, values.get(url_name) or default_url),
        key_id=values.get(key_id_name),
        private_key_path=key_path,
        ca_file=ca_file,
        allow_production=allow_production,
        time_in_force=time_in_force,
        self_trade_prevention_type=self_trade,
        shadow_signing=shadow_signing,
        presign_max_age_ms=presign_max_age_ms,
        book=book,
    )


def _check_key_is_private(name: str, path: Path) -> None:
    """Refuse a private key file that group or others may read or write, as ssh refuses one:
    whoever can read it can trade on the account."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & PRIVATE_KEY_FORBIDDEN_BITS:
        raise ConfigError(
            f"{name} {path}: readable by group or others (mode {mode:04o}); run "
            f"chmod 600 {path} (or set {ALLOW_READABLE_KEY_ENV}=1 to use it as it is)"
        )


def _check_ca_file(source: str, path: Path) -> None:
    """Refuse a CA file that is missing, unreadable or holds no PEM certificate: a local file
    problem, said as one before any connection is tried."""
    if not path.exists():
        raise ConfigError(f"{source} {path}: no such file")
    if not path.is_file():
        raise ConfigError(f"{source} {path}: not a regular file")
    try:
        pem = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{source} {path}: cannot read it ({error.strerror})") from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=pem.decode("ascii"))
    except (UnicodeDecodeError, ssl.SSLError, ValueError):
        raise ConfigError(
            f"{source} {path}: no CA certificate in it (expected PEM certificates)"
        ) from None


def _base_url(name: str, text: str) -> str:
    """Scheme and host (and port) only, no trailing slash: the signed path is appended to it."""
    url = urllib.parse.urlsplit(text.strip())
    if url.scheme != "https" or not url.hostname:
        raise ConfigError(f"{name}={text!r}: must be an https:// URL with a host")
    if url.path.rstrip("/") or url.query or url.fragment:
        raise ConfigError(
            f"{name}={text!r}: give scheme and host only (the /trade-api/v2 path is added)"
        )
    return f"https://{url.netloc}"


def _stream_url(values: Variables, environment: Environment) -> str:
    """``KALSHI_{DEMO,PROD}_WS_URL`` or the environment's published stream URL."""
    name = f"KALSHI_{environment.upper()}_WS_URL"
    text = values.get(name) or (DEMO_STREAM_URL if environment == "demo" else PROD_STREAM_URL)
    url = urllib.parse.urlsplit(text.strip())
    if url.scheme != "wss" or not url.hostname or not url.path.startswith("/"):
        raise ConfigError(f"{name}={text!r}: must be a wss:// URL with a host and a path")
    return text.strip()


def _risk_limits(values: Variables) -> RiskLimits:
    overrides: dict[str, object] = {}
    for field in dataclasses.fields(RiskLimits):
        name = RISK_ENV_VARS.get(field.name)
        if name is None or values.get(name) == "":
            continue
        default = field.default
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            continue
        kind: type[int] | type[float] = type(default)
        overrides[field.name] = values.number(name, kind, default, minimum=0)
    return dataclasses.replace(RiskLimits(), **overrides)  # type: ignore[arg-type]
