"""Configuration of the order path: the reference's ``KALSHI_*`` variables, a ``.env`` file, flags.

Sources, strongest first: the command line (the few values an operator sets per run), the process
environment, then the ``--env-file`` (a ``.env`` file read with python-dotenv; the environment wins,
as dotenv's own loader does). Every value is checked here, once, at start-up: a bad one is a
:class:`ConfigError` whose text is one line naming the variable, never a traceback and never a
silent fall back to a default.

Which exchange the executor talks to (DISPATCH.md, "three exchange modes"):

- ``--exchange fake``: the bundled fake exchange, started in-process with throwaway credentials;
- otherwise, a key id and a private key configured: the real exchange of ``KALSHI_ENVIRONMENT``
  (``demo`` unless told otherwise; ``prod`` only with ``KALSHI_ALLOW_PRODUCTION_ORDERS``);
- otherwise (or ``--exchange none``): nothing is sent; fires are decided and counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeVar, cast

import dotenv

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

FAKE_FUNDED_EXCHANGE_INDEXES: Final = frozenset({0})
"""The fake exchange's one funded shard: the allowed set when the variable is unset in fake mode."""

_TRUE_WORDS: Final = frozenset({"1", "true", "yes"})
"""The reference's words for true (DISPATCH.md §3)."""

_FALSE_WORDS: Final = frozenset({"0", "false", "no"})
"""Words taken as false. Unset or empty is the default. Anything else is refused rather than read
as false: a typo in ``KALSHI_RISK_GATE_ENABLED`` must not switch the risk gate off unannounced."""

_T = TypeVar("_T")


class ConfigError(Exception):
    """A configuration value is missing or wrong; the text is one line naming it."""


class StartupError(Exception):
    """The order path cannot start (bad key, exchange unreachable); ``str()`` is one line."""


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


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the order path is configured with."""

    exchange: ExchangeSettings
    sizing: SizingConfig
    risk_enabled: bool
    risk_limits: RiskLimits
    allowed_exchange_indexes: frozenset[int]


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
        "--environment",
        choices=("demo", "prod"),
        default=None,
        help="exchange environment (KALSHI_ENVIRONMENT; default demo)",
    )


def load_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Read and check the configuration; ``args`` are ``executor serve``'s parsed flags.

    Raises:
        ConfigError: a value is malformed, missing, or the combination is unsafe.
    """
    values = _Values(_merged_environment(getattr(args, "env_file", None), environ))
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
    )


def _merged_environment(env_file: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    if env_file is not None:
        if not env_file.is_file():
            raise ConfigError(f"--env-file {env_file}: no such file")
        try:
            from_file = dotenv.dotenv_values(env_file)
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"--env-file {env_file}: cannot read it ({error})") from None
        merged.update({key: value for key, value in from_file.items() if value is not None})
    merged.update(environ)
    return merged


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
) -> ExchangeSettings:
    allow_production = values.flag("KALSHI_ALLOW_PRODUCTION_ORDERS", default=False)
    time_in_force = values.choice(
        "KALSHI_ORDER_TIME_IN_FORCE", TIME_IN_FORCE_CHOICES, "fill_or_kill"
    )
    self_trade = values.choice(
        "KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE", SELF_TRADE_PREVENTION_CHOICES, "taker_at_cross"
    )
    ca_text = values.get("KALSHI_CA_FILE")
    ca_file = ca_flag or (Path(ca_text) if ca_text else None)
    if ca_file is not None and not ca_file.is_file():
        source = "--exchange-ca-file" if ca_flag else "KALSHI_CA_FILE"
        raise ConfigError(f"{source} {ca_file}: no such file")
    if mode != "real":
        return ExchangeSettings(
            mode=mode,
            environment=environment,
            ca_file=ca_file,
            allow_production=allow_production,
            time_in_force=time_in_force,
            self_trade_prevention_type=self_trade,
            shadow_signing=shadow_signing,
        )
    if environment == "prod" and not allow_production:
        raise ConfigError(
            "KALSHI_ENVIRONMENT is prod but KALSHI_ALLOW_PRODUCTION_ORDERS is not true: "
            "refusing to start against the production exchange"
        )
    key_id_name, key_path_name = _credential_names(values, environment)
    key_path = Path(values.get(key_path_name))
    if not key_path.is_file():
        raise ConfigError(f"{key_path_name} {key_path}: no such file")
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
    )


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
