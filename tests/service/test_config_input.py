"""Configuration input an operator gets wrong: unknown names, bad .env lines, ``~``, CA files."""

from __future__ import annotations

import argparse
import json
import re
import signal
from pathlib import Path

import pytest

from executor.config.settings import add_exchange_arguments, load_settings
from executor.config.variables import KNOWN_VARIABLES, ConfigError, UnknownVariable
from executor.fake.exchange import FakeCredentials
from tests.support.processes import Spawner

EXECUTOR_SOURCE = Path(__file__).resolve().parents[2] / "executor"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_exchange_arguments(parser)
    parser.add_argument("--contract-count", type=int, default=None)
    return parser.parse_args(list(argv))


def test_a_misspelt_variable_is_reported_with_the_closest_name() -> None:
    """KALSHI_KELLY_FRACTON is reported as unknown, naming KALSHI_KELLY_FRACTION."""
    settings = load_settings(_args(), {"KALSHI_KELLY_FRACTON": "0.1", "PATH": "/bin"})
    assert settings.unknown_variables == (
        UnknownVariable("KALSHI_KELLY_FRACTON", "the environment", "KALSHI_KELLY_FRACTION"),
    )
    assert settings.sizing.kelly_fraction == 0.15  # the typo changed nothing


@pytest.mark.parametrize("name", ["KALSHI_FOO", "KALSHI_OPENAPI_DIR", "KALSHI_LOG_LEVEL"])
def test_a_name_like_no_known_one_suggests_nothing(name: str) -> None:
    """An unknown name that resembles no known one only in its KALSHI_ prefix gets no
    suggestion (KALSHI_FOO is not "did you mean KALSHI_CA_FILE")."""
    settings = load_settings(_args(), {name: "1"})
    assert settings.unknown_variables == (UnknownVariable(name, "the environment", None),)


def test_known_and_foreign_names_are_not_reported() -> None:
    """Every known KALSHI_* name, and names without the prefix, pass without a report."""
    environ = {name: "" for name in KNOWN_VARIABLES} | {"KALSHIX": "1", "HOME": "/root"}
    assert load_settings(_args(), environ).unknown_variables == ()


def test_an_unknown_name_in_the_env_file_names_the_file(tmp_path: Path) -> None:
    """A typo in the .env file is reported with the file as its source; no match gives None."""
    env_file = tmp_path / "x.env"
    env_file.write_text("KALSHI_RISK_GATE_ENABLD=false\nKALSHI_ZZZZZZZZZZZZZZZZZZZZZZZZZ=1\n")
    unknown = load_settings(_args("--env-file", str(env_file)), {}).unknown_variables
    assert unknown == (
        UnknownVariable(
            "KALSHI_RISK_GATE_ENABLD", f"--env-file {env_file}", "KALSHI_RISK_GATE_ENABLED"
        ),
        UnknownVariable("KALSHI_ZZZZZZZZZZZZZZZZZZZZZZZZZ", f"--env-file {env_file}", None),
    )


def test_every_variable_the_code_names_is_known() -> None:
    """Each KALSHI_* name written in executor/ is in KNOWN_VARIABLES (no false 'unknown')."""
    named = set()
    for source in EXECUTOR_SOURCE.rglob("*.py"):
        named |= set(re.findall(r"\bKALSHI_[A-Z0-9_]*[A-Z0-9]\b", source.read_text()))
    # Prefixes built with an f-string (KALSHI_{environment}_...) are matched whole elsewhere.
    assert named - KNOWN_VARIABLES <= {"KALSHI_DEMO", "KALSHI_PROD"}, named - KNOWN_VARIABLES
    assert "KALSHI_KELLY_FRACTION" in named  # the scan sees the names


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("KALSHI_ENVIRONMENT=demo\nthis is not an assignment\n", 2),
        ('# comment\n\nKALSHI_CA_FILE="/unterminated\n', 3),
    ],
)
def test_an_unparseable_env_file_line_names_file_and_line(
    tmp_path: Path, text: str, line: int
) -> None:
    """A line that is not NAME=VALUE is a ConfigError naming the file and the line number."""
    env_file = tmp_path / "bad.env"
    env_file.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_settings(_args("--env-file", str(env_file)), {})
    message = str(raised.value)
    assert message.startswith(f"--env-file {env_file} line {line}: cannot parse ")
    assert "\n" not in message


def test_an_env_file_that_is_a_directory(tmp_path: Path) -> None:
    """--env-file naming a directory says so in one line."""
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(_args("--env-file", str(tmp_path)), {})


def test_tilde_in_path_values_is_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_credentials: FakeCredentials
) -> None:
    """``~/...`` in the key path and the CA file, from the env file, resolve under $HOME."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "demo.pem").write_text("the signer reads it later\n")
    (tmp_path / "demo.pem").chmod(0o600)
    (tmp_path / "ca.pem").write_bytes(fake_credentials.ca_file.read_bytes())
    env_file = tmp_path / "kalshi.env"
    env_file.write_text(
        "KALSHI_API_KEY_ID=k\nKALSHI_PRIVATE_KEY_PATH=~/demo.pem\n"
        "KALSHI_CA_FILE=~/ca.pem\nKALSHI_ALLOWED_EXCHANGE_INDEXES=0\n"
    )
    exchange = load_settings(_args("--env-file", str(env_file)), {}).exchange
    assert exchange.private_key_path == tmp_path / "demo.pem"
    assert exchange.ca_file == tmp_path / "ca.pem"


def test_tilde_in_the_env_file_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--env-file=~/x.env`` (which no shell expands after ``=``) is read from $HOME."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "x.env").write_text("KALSHI_KELLY_FRACTION=0.3\n")
    assert load_settings(_args("--env-file=~/x.env"), {}).sizing.kelly_fraction == 0.3


def test_a_ca_file_without_certificates_is_a_local_file_problem(tmp_path: Path) -> None:
    """A CA file holding no PEM certificate is refused at start-up, naming the file."""
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"KALSHI_CA_FILE .*ca\.pem: no CA certificate in it"):
        load_settings(_args(), {"KALSHI_CA_FILE": str(bad)})


def test_an_unreadable_ca_file_is_a_local_file_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CA file that cannot be read says so ("cannot read it"), not "cannot be reached"."""
    ca = tmp_path / "ca.pem"
    ca.write_text("unreadable\n")
    real_read_bytes = Path.read_bytes

    def refuse(path: Path) -> bytes:
        if path == ca:  # as root a 0000 mode would not stop the read: refuse it here
            raise PermissionError(13, "Permission denied", str(path))
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(ConfigError) as raised:
        load_settings(_args("--exchange-ca-file", str(ca)), {})
    assert str(raised.value) == f"--exchange-ca-file {ca}: cannot read it (Permission denied)"


def test_a_ca_directory_is_refused(tmp_path: Path) -> None:
    """A CA path naming a directory is "not a regular file"."""
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(_args("--exchange-ca-file", str(tmp_path)), {})


def test_serve_warns_about_a_misspelt_variable_at_start_up(
    spawner: Spawner, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running executor logs one warning naming the unknown variable and the closest name."""
    monkeypatch.setenv("KALSHI_KELLY_FRACTON", "0.1")
    executor = spawner.serve(short_dir / "x.sock", short_dir / "t.db", "--log-format", "json")
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    warnings = [
        json.loads(line)
        for line in executor.stderr_lines()
        if line.startswith("{") and "unknown KALSHI_" in line
    ]
    assert len(warnings) == 1
    assert warnings[0]["variable"] == "KALSHI_KELLY_FRACTON"
    assert warnings[0]["did_you_mean"] == "KALSHI_KELLY_FRACTION"
    assert warnings[0]["level"] == "warning"
