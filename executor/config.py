"""Configuration of the order path: the reference's ``KALSHI_*`` variables, a ``.env`` file, flags.

Sources, strongest first: the command line (the few values an operator sets per run), the process
environment, then the ``--env-file`` (a ``.env`` file read with python-dotenv; the environment wins,
as dotenv's own loader does). Every value is checked here, once, at start-up: a bad one is a
:class:`ConfigError` whose text is one line naming the variable, never a traceback and never a
silent fall back to a default. A ``KALSHI_*`` name the executor does not read (a typo, a letter
missing) is reported in ``Settings.unknown_variables`` with the closest known name, for the caller
to warn about once logging is up. Path values (the key files, the CA file)
may start with ``~``: it is the user's home, as in a shell.

Which exchange the executor talks to (DISPATCH.md, "three exchange modes"):

- ``--exchange fake``: the bundled fake exchange, started in-process with throwaway credentials;
- otherwise, a key id and a private key configured: the real exchange of ``KALSHI_ENVIRONMENT``
  (``demo`` unless told otherwise; ``prod`` only with ``KALSHI_ALLOW_PRODUCTION_ORDERS``);
- otherwise (or ``--exchange none``): nothing is sent; fires are decided and counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import io
import math
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeVar, cast

import dotenv
import dotenv.parser

from executor.decide.risk_limits import RISK_ENV_VARS, RiskLimits
from executor.decide.sizing import SizingConfig

ExchangeMode = Literal["none", "fake", "real"]
Environment = Literal["demo", "prod"]
ShadowSigning = Literal["process", "loop"]

DEMO_BASE_URL: Final = "https://external-api.demo.kalshi.co"
"""The demo exchange (Kalshi's recommended host for API traders), used when no URL is set."""

PROD_BASE_URL: Final = "https://external-api.kalshi.com"
"""The production exchange; reached only with ``KALSHI_ALLOW_PRODUCTION_ORDERS`` true."""

TIME_IN_FORCE_CHOICES: Final = ("fill_or_kill", "good_till_canceled", "immediate_or_cancel")
SELF_TRADE_PREVENTION_CHOICES: Final = ("taker_at_cross", "maker")

DEFAULT_PRESIGN_MAX_AGE_MS: Final = 100
"""Oldest a signature made ahead may be when an order uses it (ms; DISPATCH.md §10): well inside
any exchange's timestamp window (the fake's is 5 s), and short enough that an order's timestamp
still says when it left to within a tenth of a second."""
MAX_PRESIGN_MAX_AGE_MS: Final = 2000
"""Largest ``--presign-max-age-ms`` accepted (ms): the exchange checks the timestamp's freshness
in a window this project does not know precisely; beyond 2 s an order would risk a 401."""

FAKE_FUNDED_EXCHANGE_INDEXES: Final = frozenset({0})
"""The fake exchange's one funded shard: the allowed set when the variable is unset in fake mode."""

_TRUE_WORDS: Final = frozenset({"1", "true", "yes"})
"""The reference's words for true (DISPATCH.md §3)."""

_FALSE_WORDS: Final = frozenset({"0", "false", "no"})
"""Words taken as false. Unset or empty is the default. Anything else is refused rather than read
as false: a typo in ``KALSHI_RISK_GATE_ENABLED`` must not switch the risk gate off unannounced."""

VARIABLE_PREFIX: Final = "KALSHI_"
"""Variables under this prefix are the executor's; an unknown one is warned about."""

KNOWN_VARIABLES: Final = frozenset(
    {
        "KALSHI_ENVIRONMENT",
        "KALSHI_API_KEY_ID",
        "KALSHI_PRIVATE_KEY_PATH",
        *(
            f"KALSHI_{environment}_{suffix}"
            for environment in ("DEMO", "PROD")
            for suffix in ("API_KEY_ID", "PRIVATE_KEY_PATH", "BASE_URL")
        ),
        "KALSHI_ALLOW_PRODUCTION_ORDERS",
        "KALSHI_CA_FILE",
        "KALSHI_ORDER_TIME_IN_FORCE",
        "KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE",
        "KALSHI_FIXED_ORDER_CONTRACT_COUNT",
        "KALSHI_KELLY_FRACTION",
        "KALSHI_MAX_POSITION_PCT_OF_BALANCE",
        "KALSHI_RISK_GATE_ENABLED",
        "KALSHI_ALLOWED_EXCHANGE_INDEXES",
        *RISK_ENV_VARS.values(),
    }
)
"""Every ``KALSHI_*`` variable the executor reads (a test checks each name the code mentions is
here, so a new variable cannot be warned about as unknown)."""

_T = TypeVar("_T")


class StartupError(Exception):
    """The order path cannot start (bad key, exchange unreachable); ``str()`` is one line."""


class ConfigError(StartupError):
    """A configuration value is missing or wrong; the text is one line naming it.

    A start-up error of its own kind: the command line exits 2 for it (a usage or configuration
    mistake, the same each time it is run) and 1 for the other start-up failures.
    """


@dataclass(frozen=True, slots=True)
class UnknownVariable:
    """A ``KALSHI_*`` name nothing reads, where it was found, and the closest known name."""

    name: str
    source: str
    closest: str | None


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
        "order path (see docs/OPERATIONS.md for every KALSHI_* variable)"
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
    from_file = _read_env_file(env_file.expanduser()) if env_file is not None else {}
    values = _Values({**from_file, **environ})
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
    return Settings(
        exchange=exchange,
        sizing=sizing,
        risk_enabled=risk_enabled,
        risk_limits=_risk_limits(values),
        allowed_exchange_indexes=allowed,
        unknown_variables=unknown_variables(from_file, environ, env_file),
    )


def unknown_variables(
    from_file: Mapping[str, str], environ: Mapping[str, str], env_file: Path | None = None
) -> tuple[UnknownVariable, ...]:
    """The ``KALSHI_*`` names in either source that the executor does not read, sorted."""
    found: dict[str, str] = {}
    for name in from_file:
        if name.startswith(VARIABLE_PREFIX) and name not in KNOWN_VARIABLES:
            found[name] = f"--env-file {env_file}"
    for name in environ:
        if name.startswith(VARIABLE_PREFIX) and name not in KNOWN_VARIABLES:
            found.setdefault(name, "the environment")
    return tuple(
        UnknownVariable(
            name, source, next(iter(difflib.get_close_matches(name, KNOWN_VARIABLES, n=1)), None)
        )
        for name, source in sorted(found.items())
    )


def _read_env_file(env_file: Path) -> dict[str, str]:
    """The variables of a ``.env`` file; any line that is not ``NAME=VALUE`` is refused."""
    if not env_file.exists():
        raise ConfigError(f"--env-file {env_file}: no such file")
    if not env_file.is_file():
        raise ConfigError(f"--env-file {env_file}: not a regular file")
    try:
        text = env_file.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--env-file {env_file}: cannot read it ({error.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--env-file {env_file}: not UTF-8 text") from None
    for binding in dotenv.parser.parse_stream(io.StringIO(text)):
        if binding.error:
            original = binding.original.string
            # The parser's chunk starts with the blank lines before it; count from the text.
            line = binding.original.line + original[: len(original) - len(original.lstrip())].count(
                "\n"
            )
            shown = original.strip()
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ConfigError(
                f"--env-file {env_file} line {line}: cannot parse {shown!r} "
                "(expected NAME=VALUE, a comment, or a blank line)"
            )
    values = dotenv.dotenv_values(stream=io.StringIO(text))
    return {key: value for key, value in values.items() if value is not None}


def _exchange_mode(requested: str, values: _Values, environment: Environment) -> ExchangeMode:
    if requested in ("fake", "none"):
        return "fake" if requested == "fake" else "none"
    key_id_name, key_path_name = _credential_names(values, environment)
    has_id, has_key = bool(values.get(key_id_name)), bool(values.get(key_path_name))
    if has_id != has_key:
        present, missing = (key_id_name, key_path_name) if has_id else (key_path_name, key_id_name)
        raise ConfigError(f"{present} is set but {missing} is not: both are needed to trade")
    return "real" if has_id else "none"


def _credential_names(values: _Values, environment: Environment) -> tuple[str, str]:
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
    values: _Values,
    ca_flag: Path | None,
    shadow_signing: ShadowSigning = "process",
    presign_max_age_ms: int = DEFAULT_PRESIGN_MAX_AGE_MS,
) -> ExchangeSettings:
    allow_production = values.flag("KALSHI_ALLOW_PRODUCTION_ORDERS", default=False)
    time_in_force = values.choice(
        "KALSHI_ORDER_TIME_IN_FORCE", TIME_IN_FORCE_CHOICES, "fill_or_kill"
    )
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


def _risk_limits(values: _Values) -> RiskLimits:
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


class _Values:
    """Typed, checked reads of the merged variables; every error names its variable."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self._variables = variables

    def get(self, name: str) -> str:
        return self._variables.get(name, "").strip()

    def path(self, name: str) -> Path | None:
        """A file path, ``~`` expanded; None when unset or empty."""
        text = self.get(name)
        return Path(text).expanduser() if text else None

    def flag(self, name: str, *, default: bool) -> bool:
        text = self.get(name).lower()
        if not text:  # unset or empty: an empty value must not switch a safety off
            return default
        if text in _TRUE_WORDS:
            return True
        if text in _FALSE_WORDS:
            return False
        raise ConfigError(f"{name}={self.get(name)!r}: expected 1/true/yes or 0/false/no")

    def choice(self, name: str, choices: tuple[str, ...], default: _T) -> _T:
        text = self.get(name)
        if not text:
            return default
        if text not in choices:
            raise ConfigError(f"{name}={text!r}: expected one of {', '.join(choices)}")
        return text  # type: ignore[return-value]

    def number(
        self,
        name: str,
        kind: Callable[[str], _T],
        default: _T,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> _T:
        text = self.get(name)
        if not text:
            return default
        noun = "an integer" if kind is int else "a number"
        try:
            value = kind(text)
        except ValueError:
            raise ConfigError(f"{name}={text!r}: expected {noun}") from None
        as_float = float(value)  # type: ignore[arg-type]
        if not math.isfinite(as_float):
            raise ConfigError(f"{name}={text!r}: expected a finite number")
        if minimum is not None and as_float < minimum:
            raise ConfigError(f"{name}={text!r}: must be at least {minimum:g}")
        if maximum is not None and as_float > maximum:
            raise ConfigError(f"{name}={text!r}: must be at most {maximum:g}")
        return value

    def indexes(self, name: str) -> frozenset[int] | None:
        """A comma-separated set of integers; None when the variable is unset or empty."""
        text = self.get(name)
        if not text:
            return None
        try:
            return frozenset(int(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise ConfigError(
                f"{name}={text!r}: expected comma-separated integers, e.g. 0,1"
            ) from None
