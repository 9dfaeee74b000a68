"""The suite starts its longest test, the crash campaign, first (``tests/conftest.py``), so that
pytest-xdist's workers finish together instead of one running it alone at the end (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import STARTED_FIRST, start_order


def test_the_collected_tests_run_longest_first(request: pytest.FixtureRequest) -> None:
    """However many tests were collected, their ranks never fall back (the campaign before all
    the rest), and each module's tests stay together in their own order."""
    ranks = [start_order(item) for item in request.session.items]
    assert ranks == sorted(ranks)
    modules = [item.nodeid.split("::", 1)[0] for item in request.session.items]
    runs = [
        module for index, module in enumerate(modules) if modules[index - 1 : index] != [module]
    ]
    assert len(runs) == len(set(runs)), "a module's tests were split apart"


@pytest.mark.parametrize(
    ("nodeid", "rank"),
    [
        ("tests/service/test_crash_orders.py::test_sigkills", 0),
        ("tests/service/test_cli.py::test_x", 1),
        ("tests/wire/test_protocol.py::test_x", 1),
        ("tests/test_layers.py::test_x", 1),
    ],
)
def test_the_crash_campaign_ranks_first(nodeid: str, rank: int) -> None:
    """The crash campaign's module ranks before every other; the rest share one rank."""

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    assert start_order(Item(nodeid)) == rank  # type: ignore[arg-type]


def test_the_modules_started_first_exist() -> None:
    """Each module named in STARTED_FIRST is a file of the suite (a rename would silently drop
    it back into the collection order)."""
    root = Path(__file__).resolve().parents[1]
    assert all((root / module).is_file() for module in STARTED_FIRST)
