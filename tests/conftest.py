"""Shared fixtures: short socket directories, sample wakes, and an in-process server."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from executor import logs
from executor.fake.exchange import FakeCredentials, FakeExchange, serve_fake_exchange
from tests.support.inprocess import RunningServer, start_server
from tests.support.processes import Spawner

STRAY_PREFIX = "KALSHI_"
"""Variables the executor reads (and warns about when it does not know one)."""

_stray_variables: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    """No ``KALSHI_*`` variable of the caller's shell reaches a test or an executor a test
    starts: each test sets the ones it means. A stray one would make every executor warn of an
    unknown variable, or trade against the exchange it names. Put back when the run ends."""
    for name in [name for name in os.environ if name.startswith(STRAY_PREFIX)]:
        _stray_variables[name] = os.environ.pop(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The caller's ``KALSHI_*`` variables, back as they were."""
    os.environ.update(_stray_variables)
    _stray_variables.clear()


STARTED_FIRST: tuple[str, ...] = ("tests/service/test_crash_orders.py",)
"""Modules whose tests start before all others: the crash campaign runs ~50 s, five times the
next longest test; the other long tests stay spread among the short ones (started together,
the process-heavy tests crowd each other past their start-up bounds on a loaded machine)."""


def start_order(item: pytest.Item) -> int:
    """0 for a test of :data:`STARTED_FIRST`, 1 for the rest."""
    return 0 if item.nodeid.split("::", 1)[0] in STARTED_FIRST else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The crash campaign first (a stable sort: everything else keeps its order): under
    pytest-xdist (``dev.py test``) it then runs while the other workers share the rest, rather
    than alone at the end when a worker happens to reach it last."""
    items.sort(key=start_order)


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> None:
    """Every test starts with a fresh budget of rate-limited warnings (their kinds are global)."""
    logs.reset_rate_limits()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short temporary directory (pytest's tmp_path can exceed the AF_UNIX path limit)."""
    path = Path(tempfile.mkdtemp(prefix="tx-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def executor_server(nursery: trio.Nursery, short_dir: Path) -> AsyncIterator[RunningServer]:
    """A default in-process executor, shut down in order after the test."""
    running = await start_server(nursery, short_dir)
    yield running
    if not running.finished.is_set():
        await running.shutdown()


@pytest.fixture(scope="session")
def fake_credentials(tmp_path_factory: pytest.TempPathFactory) -> FakeCredentials:
    """One throwaway API key and CA for the session (generating them takes ~0.1 s)."""
    return FakeCredentials.generate(tmp_path_factory.mktemp("fake-exchange"))


@pytest.fixture
async def fake_exchange(nursery: trio.Nursery, fake_credentials: FakeCredentials) -> FakeExchange:
    """A fake exchange serving HTTPS on 127.0.0.1 for one test."""
    exchange: FakeExchange = await nursery.start(serve_fake_exchange, fake_credentials)
    return exchange


@pytest.fixture
def spawner(short_dir: Path) -> Iterator[Spawner]:
    """A process starter whose leftovers are killed when the test ends, pass or fail."""
    spawner = Spawner(short_dir)
    try:
        yield spawner
    finally:
        spawner.kill_all()
