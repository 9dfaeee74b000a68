"""``executor group reset``: bad usage and a configuration without a real exchange are one line
on stderr and exit status 1, nothing sent (the reset itself: ``test_exchange_halts``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.cli import main


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["group"], "the following arguments are required"),
        (["group", "reset"], "--telemetry-db"),
        (["group", "resume", "--telemetry-db", "t.db"], "invalid choice"),
    ],
)
def test_bad_usage_is_one_line_and_exit_1(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing command, a missing database or an unknown command: exit 1, one line."""
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("executor group: ") and says in err[0]


def test_without_a_real_exchange_configured_nothing_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No KALSHI_API_KEY_ID / KALSHI_PRIVATE_KEY_PATH: exit 1 with one line naming them."""
    for name in ("KALSHI_API_KEY_ID", "KALSHI_PRIVATE_KEY_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert main(["group", "reset", "--telemetry-db", str(tmp_path / "t.db")]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the group is reset on the exchange, but no exchange is configured" in line
