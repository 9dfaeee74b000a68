"""Configuration: KALSHI_* variables, the .env file, flags, the three exchange modes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from executor.config.book import BookSettings
from executor.config.settings import (
    DEMO_BASE_URL,
    DEMO_STREAM_URL,
    PROD_BASE_URL,
    PROD_STREAM_URL,
    add_exchange_arguments,
    load_settings,
)
from executor.config.variables import ConfigError
from executor.decide.risk import RISK_ENV_VARS, RiskLimits
from executor.fake.exchange import FakeCredentials


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_exchange_arguments(parser)
    parser.add_argument("--contract-count", type=int, default=None)
    return parser.parse_args(list(argv))


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key.pem"
    path.write_text("not parsed here: the signer loads it\n")
    path.chmod(0o600)  # a key others can read is refused
    return path


def _real_env(key_file: Path, **extra: str) -> dict[str, str]:
    return {
        "KALSHI_API_KEY_ID": "key-123",
        "KALSHI_PRIVATE_KEY_PATH": str(key_file),
        "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0,2",
        **extra,
    }


def test_nothing_configured_sends_nothing() -> None:
    """With no credentials and no --exchange the mode is none and nothing is required."""
    settings = load_settings(_args(), {})
    assert settings.exchange.mode == "none"
    assert settings.exchange.base_url is None
    assert settings.allowed_exchange_indexes == frozenset()
    assert settings.risk_enabled is True
    assert settings.sizing.fixed_contract_count == 1
    assert settings.risk_limits == RiskLimits()


def test_credentials_select_the_demo_exchange(key_file: Path) -> None:
    """A key id and a key path select the real exchange, demo by default, at its default URL."""
    settings = load_settings(_args(), _real_env(key_file))
    exchange = settings.exchange
    assert exchange.mode == "real"
    assert exchange.environment == "demo"
    assert exchange.base_url == DEMO_BASE_URL == "https://external-api.demo.kalshi.co"
    assert exchange.key_id == "key-123"
    assert exchange.private_key_path == key_file
    assert settings.allowed_exchange_indexes == frozenset({0, 2})


def test_per_environment_credentials_win(key_file: Path, tmp_path: Path) -> None:
    """KALSHI_DEMO_API_KEY_ID / _PRIVATE_KEY_PATH take precedence over the plain names."""
    other = tmp_path / "demo.pem"
    other.write_text("x")
    other.chmod(0o600)
    env = _real_env(
        key_file, KALSHI_DEMO_API_KEY_ID="demo-key", KALSHI_DEMO_PRIVATE_KEY_PATH=str(other)
    )
    exchange = load_settings(_args(), env).exchange
    assert (exchange.key_id, exchange.private_key_path) == ("demo-key", other)


def test_prod_needs_the_production_flag(key_file: Path) -> None:
    """Prod without KALSHI_ALLOW_PRODUCTION_ORDERS refuses to start, naming both variables."""
    with pytest.raises(ConfigError, match="KALSHI_ALLOW_PRODUCTION_ORDERS"):
        load_settings(_args(), _real_env(key_file, KALSHI_ENVIRONMENT="prod"))
    allowed = _real_env(key_file, KALSHI_ENVIRONMENT="prod", KALSHI_ALLOW_PRODUCTION_ORDERS="yes")
    exchange = load_settings(_args(), allowed).exchange
    assert (exchange.environment, exchange.base_url) == ("prod", PROD_BASE_URL)


def test_environment_flag_overrides_the_variable(key_file: Path) -> None:
    """--environment prod acts as KALSHI_ENVIRONMENT=prod (so it is refused without the flag)."""
    with pytest.raises(ConfigError, match="prod"):
        load_settings(_args("--environment", "prod"), _real_env(key_file))


def test_real_exchange_with_gate_needs_allowed_indexes(key_file: Path) -> None:
    """With the gate enabled and no allowed indexes a real exchange is refused with a reason."""
    env = _real_env(key_file)
    del env["KALSHI_ALLOWED_EXCHANGE_INDEXES"]
    with pytest.raises(ConfigError, match="KALSHI_ALLOWED_EXCHANGE_INDEXES is empty"):
        load_settings(_args(), env)
    settings = load_settings(_args(), {**env, "KALSHI_RISK_GATE_ENABLED": "false"})
    assert settings.risk_enabled is False and settings.exchange.mode == "real"


def test_fake_exchange_allows_the_funded_shard() -> None:
    """--exchange fake needs no credentials and allows shard 0 when the variable is unset."""
    settings = load_settings(_args("--exchange", "fake"), {})
    assert settings.exchange.mode == "fake"
    assert settings.allowed_exchange_indexes == frozenset({0})
    explicit = load_settings(_args("--exchange", "fake"), {"KALSHI_ALLOWED_EXCHANGE_INDEXES": "3"})
    assert explicit.allowed_exchange_indexes == frozenset({3})


def test_exchange_none_ignores_credentials(key_file: Path) -> None:
    """--exchange none sends nothing even when credentials are configured."""
    assert load_settings(_args("--exchange", "none"), _real_env(key_file)).exchange.mode == "none"


@pytest.mark.parametrize(
    ("present", "missing"),
    [
        ("KALSHI_API_KEY_ID", "KALSHI_PRIVATE_KEY_PATH"),
        ("KALSHI_PRIVATE_KEY_PATH", "KALSHI_API_KEY_ID"),
    ],
)
def test_half_the_credentials_is_an_error(present: str, missing: str, key_file: Path) -> None:
    """A key id without a key (or the reverse) names both variables rather than sending nothing."""
    env = {present: "key-123" if present.endswith("_ID") else str(key_file)}
    with pytest.raises(ConfigError, match=f"{present} is set but {missing} is not"):
        load_settings(_args(), env)


def test_missing_key_file_is_named(tmp_path: Path) -> None:
    """A private key path that does not exist is one line naming the variable and the path."""
    env = {"KALSHI_API_KEY_ID": "k", "KALSHI_PRIVATE_KEY_PATH": str(tmp_path / "absent.pem")}
    with pytest.raises(ConfigError, match=r"KALSHI_PRIVATE_KEY_PATH .*absent\.pem: no such file"):
        load_settings(_args(), {**env, "KALSHI_ALLOWED_EXCHANGE_INDEXES": "0"})


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("KALSHI_ENVIRONMENT", "staging", "expected one of demo, prod"),
        ("KALSHI_ORDER_TIME_IN_FORCE", "day", "expected one of fill_or_kill"),
        ("KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE", "none", "expected one of taker_at_cross"),
        ("KALSHI_RISK_GATE_ENABLED", "ture", "expected 1/true/yes or 0/false/no"),
        ("KALSHI_ALLOW_PRODUCTION_ORDERS", "sure", "expected 1/true/yes or 0/false/no"),
        ("KALSHI_FIXED_ORDER_CONTRACT_COUNT", "1.5", "expected an integer"),
        ("KALSHI_FIXED_ORDER_CONTRACT_COUNT", "0", "must be at least 1"),
        ("KALSHI_KELLY_FRACTION", "lots", "expected a number"),
        ("KALSHI_KELLY_FRACTION", "nan", "expected a finite number"),
        ("KALSHI_MAX_POSITION_PCT_OF_BALANCE", "1.5", "must be at most 1"),
        ("KALSHI_ALLOWED_EXCHANGE_INDEXES", "0,one", "expected comma-separated integers"),
        ("KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR", "-1", "must be at least 0"),
        ("KALSHI_RISK_MAX_ATTEMPTS_PER_HOUR", "ten", "expected an integer"),
        ("KALSHI_CA_FILE", "/nonexistent/ca.pem", "KALSHI_CA_FILE /nonexistent/ca.pem: no such"),
    ],
)
def test_bad_values_name_their_variable(name: str, value: str, fragment: str) -> None:
    """Each malformed variable is a one-line ConfigError naming it, never a silent default."""
    with pytest.raises(ConfigError) as caught:
        load_settings(_args(), {name: value})
    text = str(caught.value)
    assert name in text and fragment in text
    assert "\n" not in text


def test_true_words_are_the_references() -> None:
    """1, true and yes (any case) are true; 0, false and no are false; empty is the default."""
    for word, expected in [
        ("1", True),
        ("TRUE", True),
        ("yes", True),
        ("0", False),
        ("no", False),
        ("False", False),
        ("", True),
    ]:
        settings = load_settings(_args(), {"KALSHI_RISK_GATE_ENABLED": word})
        assert settings.risk_enabled is expected, word


@pytest.mark.parametrize(
    "url", ["http://example.test", "https://", "https://h.test/trade-api/v2", "https://h.test?q=1"]
)
def test_base_url_must_be_https_scheme_and_host(url: str, key_file: Path) -> None:
    """A base URL with another scheme, no host, or a path is refused, naming the variable."""
    with pytest.raises(ConfigError, match="KALSHI_DEMO_BASE_URL"):
        load_settings(_args(), _real_env(key_file, KALSHI_DEMO_BASE_URL=url))


def test_base_url_trailing_slash_is_dropped(key_file: Path) -> None:
    """``https://host:8443/`` is taken as ``https://host:8443`` (the signed path is appended)."""
    env = _real_env(key_file, KALSHI_DEMO_BASE_URL="https://127.0.0.1:8443/")
    assert load_settings(_args(), env).exchange.base_url == "https://127.0.0.1:8443"


def test_sizing_and_order_shape_variables(key_file: Path) -> None:
    """Sizing, time in force and self-trade prevention come from their variables."""
    env = _real_env(
        key_file,
        KALSHI_FIXED_ORDER_CONTRACT_COUNT="3",
        KALSHI_KELLY_FRACTION="0.5",
        KALSHI_MAX_POSITION_PCT_OF_BALANCE="0.1",
        KALSHI_ORDER_TIME_IN_FORCE="good_till_canceled",
        KALSHI_ORDER_SELF_TRADE_PREVENTION_TYPE="maker",
    )
    settings = load_settings(_args(), env)
    assert (settings.sizing.fixed_contract_count, settings.sizing.kelly_fraction) == (3, 0.5)
    assert settings.sizing.max_position_pct_of_balance == 0.1
    assert settings.exchange.time_in_force == "good_till_canceled"
    assert settings.exchange.self_trade_prevention_type == "maker"


def test_contract_count_flag_overrides_the_variable() -> None:
    """--contract-count wins over KALSHI_FIXED_ORDER_CONTRACT_COUNT; absent, the variable counts."""
    env = {"KALSHI_FIXED_ORDER_CONTRACT_COUNT": "4"}
    assert load_settings(_args(), env).sizing.fixed_contract_count == 4
    assert load_settings(_args("--contract-count", "2"), env).sizing.fixed_contract_count == 2


def test_every_risk_variable_is_read() -> None:
    """Each KALSHI_RISK_* limit variable sets its RiskLimits field."""
    for field in dataclasses.fields(RiskLimits):
        name = RISK_ENV_VARS.get(field.name)
        if name is None:
            continue
        default = field.default
        value: float = 7 if isinstance(default, int) else 7.5
        limits = load_settings(_args(), {name: str(value)}).risk_limits
        assert getattr(limits, field.name) == value, name


def test_env_file_is_read_and_the_environment_wins(tmp_path: Path, key_file: Path) -> None:
    """--env-file supplies variables; a variable also in the process environment keeps its value."""
    env_file = tmp_path / ".env"
    env_file.write_text(
        "# the operator's file\n"
        f"KALSHI_API_KEY_ID=from-file\nKALSHI_PRIVATE_KEY_PATH={key_file}\n"
        "KALSHI_ALLOWED_EXCHANGE_INDEXES=1\nexport KALSHI_KELLY_FRACTION='0.25'\n"
    )
    settings = load_settings(
        _args("--env-file", str(env_file)), {"KALSHI_API_KEY_ID": "from-environment"}
    )
    assert settings.exchange.mode == "real"
    assert settings.exchange.key_id == "from-environment"
    assert settings.allowed_exchange_indexes == frozenset({1})
    assert settings.sizing.kelly_fraction == 0.25


def test_missing_env_file_is_an_error(tmp_path: Path) -> None:
    """An --env-file that does not exist is one line, not an empty configuration."""
    with pytest.raises(ConfigError, match=r"--env-file .*: no such file"):
        load_settings(_args("--env-file", str(tmp_path / "absent.env")), {})


def test_ca_file_flag_and_variable(tmp_path: Path, fake_credentials: FakeCredentials) -> None:
    """--exchange-ca-file wins over KALSHI_CA_FILE; both must name an existing file."""
    flag_ca, var_ca = tmp_path / "a.pem", tmp_path / "b.pem"
    flag_ca.write_bytes(fake_credentials.ca_file.read_bytes())
    var_ca.write_bytes(fake_credentials.ca_file.read_bytes())
    env = {"KALSHI_CA_FILE": str(var_ca)}
    assert load_settings(_args(), env).exchange.ca_file == var_ca
    assert load_settings(_args("--exchange-ca-file", str(flag_ca)), env).exchange.ca_file == flag_ca
    with pytest.raises(ConfigError, match="--exchange-ca-file"):
        load_settings(_args("--exchange-ca-file", str(tmp_path / "none.pem")), {})


def test_presign_max_age_defaults_to_100_ms_and_0_turns_it_off(key_file: Path) -> None:
    """--presign-max-age-ms reaches the exchange settings: default 100, 0 kept as off."""
    assert load_settings(_args(), _real_env(key_file)).exchange.presign_max_age_ms == 100
    off = load_settings(_args("--presign-max-age-ms", "0"), _real_env(key_file))
    assert off.exchange.presign_max_age_ms == 0
    fake = load_settings(_args("--exchange", "fake", "--presign-max-age-ms", "250"), {})
    assert fake.exchange.presign_max_age_ms == 250


@pytest.mark.parametrize("value", ["-1", "2001", "ten", "1.5"])
def test_a_bad_presign_max_age_is_a_one_line_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A negative, too large or non-integer age is refused by the parser with its reason."""
    with pytest.raises(SystemExit):
        _args("--presign-max-age-ms", value)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--presign-max-age-ms" in error and ("outside" in error or "whole number" in error)


def test_the_stream_is_on_by_default_at_the_environments_published_url(key_file: Path) -> None:
    """Demo and prod each get their published wss:// URL; --stream off turns the stream off."""
    demo = load_settings(_args(), _real_env(key_file)).exchange
    assert (demo.stream, demo.stream_url) == (True, DEMO_STREAM_URL)
    assert DEMO_STREAM_URL == "wss://external-api-ws.demo.kalshi.co/trade-api/ws/v2"
    prod_env = _real_env(key_file, KALSHI_ALLOW_PRODUCTION_ORDERS="true")
    prod = load_settings(_args("--environment", "prod"), prod_env).exchange
    assert prod.stream_url == PROD_STREAM_URL == "wss://external-api-ws.kalshi.com/trade-api/ws/v2"
    assert load_settings(_args("--stream", "off"), _real_env(key_file)).exchange.stream is False


def test_the_stream_url_variable_is_checked(key_file: Path) -> None:
    """KALSHI_DEMO_WS_URL replaces the default; an https:// URL there is refused, named."""
    own = "wss://ws.example.test/trade-api/ws/v2"
    settings = load_settings(_args(), _real_env(key_file, KALSHI_DEMO_WS_URL=own))
    assert settings.exchange.stream_url == own
    with pytest.raises(ConfigError, match="KALSHI_DEMO_WS_URL"):
        load_settings(_args(), _real_env(key_file, KALSHI_DEMO_WS_URL="https://ws.example.test/x"))


def test_the_book_settings_default_to_a_group_of_50_and_cancel_on_pause(key_file: Path) -> None:
    """Unset: a group limit of 50 contracts, orders cancelled at a pause, the engage policy left
    to the time in force (None), no cancel at exit."""
    book = load_settings(_args(), _real_env(key_file)).exchange.book
    assert book == BookSettings(50, True, None, False)


def test_the_book_variables_and_flags_are_read(key_file: Path) -> None:
    """The limit (0 = no group) and the pause flag from variables, the two cancel flags from the
    command line, both ways."""
    env = _real_env(
        key_file, KALSHI_ORDER_GROUP_CONTRACTS_LIMIT="0", KALSHI_ORDER_CANCEL_ON_PAUSE="no"
    )
    args = _args("--no-cancel-resting-on-engage", "--cancel-resting-on-exit")
    assert load_settings(args, env).exchange.book == BookSettings(0, False, False, True)
    fake = load_settings(_args("--exchange", "fake", "--cancel-resting-on-engage"), {})
    assert fake.exchange.book.cancel_resting_on_engage is True


@pytest.mark.parametrize("value", ["-1", "1000001", "ten", "2.5"])
def test_a_bad_group_limit_names_its_variable(value: str) -> None:
    """A limit outside 0..1,000,000 (Kalshi's most) or not a whole number is a ConfigError."""
    with pytest.raises(ConfigError, match="KALSHI_ORDER_GROUP_CONTRACTS_LIMIT"):
        load_settings(_args(), {"KALSHI_ORDER_GROUP_CONTRACTS_LIMIT": value})
