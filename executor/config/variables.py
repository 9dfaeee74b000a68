"""The ``KALSHI_*`` variables: which the executor reads, the ``--env-file``, and checked reads.

The process environment and the ``--env-file`` (a ``.env`` file read with python-dotenv; the
environment wins, as dotenv's own loader does) are merged by ``executor.config.settings``, which
turns them into settings through :class:`Variables`: typed reads where a bad value is a
:class:`ConfigError` whose text is one line naming the variable, never a traceback and never a
silent fall back to a default. A ``KALSHI_*`` name the executor does not read (a typo, a letter
missing) is found by :func:`unknown_variables` with the closest known name, for the caller to warn
about once logging is up. Path values (the key files, the CA file) may start with ``~``: it is the
user's home, as in a shell.

The start-up errors live here, the lowest module that raises them: :class:`StartupError` (the
order path cannot start) and its kind :class:`ConfigError` (a configuration mistake).
"""

from __future__ import annotations

import difflib
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import dotenv
import dotenv.parser

from executor.config.risk_limits import RISK_ENV_VARS

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
            for suffix in ("API_KEY_ID", "PRIVATE_KEY_PATH", "BASE_URL", "WS_URL")
        ),
        "KALSHI_ALLOW_PRODUCTION_ORDERS",
        "KALSHI_ALLOW_READABLE_PRIVATE_KEY",
        "KALSHI_CA_FILE",
        "KALSHI_ORDER_TIME_IN_FORCE",
        "KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE",
        "KALSHI_FIXED_ORDER_CONTRACT_COUNT",
        "KALSHI_KELLY_FRACTION",
        "KALSHI_MAX_POSITION_PCT_OF_BALANCE",
        "KALSHI_RISK_GATE_ENABLED",
        "KALSHI_ALLOWED_EXCHANGE_INDEXES",
        "KALSHI_ORDER_GROUP_CONTRACTS_LIMIT",
        "KALSHI_ORDER_CANCEL_ON_PAUSE",
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
        UnknownVariable(name, source, _closest_known(name))
        for name, source in sorted(found.items())
    )


def _closest_known(name: str) -> str | None:
    """The known name ``name`` is most likely a misspelling of, or None when none is close.

    Compared without the ``KALSHI_`` prefix every name shares: with it, any short name looks
    60% like a known one (``FOO`` with the prefix would suggest the CA file's variable)."""
    suffixes = {known.removeprefix(VARIABLE_PREFIX): known for known in KNOWN_VARIABLES}
    matches = difflib.get_close_matches(name.removeprefix(VARIABLE_PREFIX), suffixes, n=1)
    return suffixes[matches[0]] if matches else None


def read_env_file(env_file: Path) -> dict[str, str]:
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


class Variables:
    """Typed, checked reads of the merged variables; every error names its variable."""

    def __init__(self, variables: Mapping[str, str]) -> None:
        self._variables = variables

    def get(self, name: str) -> str:
        """The value, stripped; empty when unset."""
        return self._variables.get(name, "").strip()

    def path(self, name: str) -> Path | None:
        """A file path, ``~`` expanded; None when unset or empty."""
        text = self.get(name)
        return Path(text).expanduser() if text else None

    def flag(self, name: str, *, default: bool) -> bool:
        """A true/false word; ``default`` when unset or empty."""
        text = self.get(name).lower()
        if not text:  # unset or empty: an empty value must not switch a safety off
            return default
        if text in _TRUE_WORDS:
            return True
        if text in _FALSE_WORDS:
            return False
        raise ConfigError(f"{name}={self.get(name)!r}: expected 1/true/yes or 0/false/no")

    def choice(self, name: str, choices: tuple[str, ...], default: _T) -> _T:
        """One of ``choices``; ``default`` when unset or empty."""
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
        """A finite number of ``kind`` within the bounds; ``default`` when unset or empty."""
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
