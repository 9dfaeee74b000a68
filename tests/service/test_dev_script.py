"""``dev.py`` for a newcomer: paths as the caller wrote them, a try-out that never stalls."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.recording.database import close_database, open_database
from tests.support.dev import require_dev_environment, run_dev


@pytest.fixture
def caller_dir(short_dir: Path) -> Path:
    """The caller's working directory, holding a telemetry file named relatively as ``rel.db``."""
    require_dev_environment()
    connection, _ = open_database(short_dir / "rel.db")
    close_database(connection, short_dir / "rel.db")
    return short_dir


@pytest.mark.parametrize(("command", "expected"), [("stats", "no rows"), ("orders", "no orders")])
def test_a_relative_database_is_read_from_the_callers_directory(
    caller_dir: Path, command: str, expected: str
) -> None:
    """``dev.py stats|orders --telemetry-db rel.db`` reads ``rel.db`` where the caller is, not in
    the checkout."""
    ran = run_dev(command, "--telemetry-db", "rel.db", cwd=caller_dir)
    assert ran.returncode == 0, ran.stderr
    assert expected in ran.stdout


def test_a_relative_plot_lands_in_the_callers_directory(caller_dir: Path) -> None:
    """``dev.py stats --plot y.png`` writes ``y.png`` where the caller is."""
    pytest.importorskip("matplotlib")
    ran = run_dev("stats", "--telemetry-db", "rel.db", "--plot", "y.png", cwd=caller_dir)
    assert ran.returncode == 0, ran.stderr
    assert (caller_dir / "y.png").stat().st_size > 0
    assert not (Path(__file__).resolve().parents[2] / "y.png").exists()
