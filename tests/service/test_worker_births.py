"""Signing workers that die at birth: the executor still starts, says so in one line each, and
trades by signing on the loop.

A worker is a ``multiprocessing`` spawn child (``python -c ... --multiprocessing-fork``). A
``sitecustomize`` on the executor's ``PYTHONPATH`` ends every such child before it can run
anything: the broken environment a worker meets at birth.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.support.inprocess import make_wake
from tests.support.processes import Spawner, exit_counters, request_all

KILL_WORKERS_AT_BIRTH = """\
import os
import sys

if "--multiprocessing-fork" in sys.argv:
    os._exit(3)
"""


@pytest.fixture
def workers_die_at_birth(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker process the executors of this test start dies before its first job."""
    site = short_dir / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(KILL_WORKERS_AT_BIRTH)
    monkeypatch.setenv("PYTHONPATH", str(site))


def _json_lines(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(
    "presign", [[], ["--presign-max-age-ms", "0"]], ids=["signing-ahead", "no-signing-ahead"]
)
@pytest.mark.usefixtures("workers_die_at_birth")
def test_workers_that_cannot_start_are_one_warning_each_and_orders_still_fill(
    spawner: Spawner, short_dir: Path, presign: list[str]
) -> None:
    """With signing ahead on (the default) as with it off, a worker that dies at birth is one
    warning line naming it, never a traceback: the executor serves, and a real order is signed
    inline on the loop and filled."""
    socket_path = short_dir / "x.sock"
    executor = spawner.serve(socket_path, short_dir / "t.db", "--exchange", "fake", *presign)
    acks = request_all(socket_path, [make_wake("born-dead", exchange_index=0)])
    assert [ack.status for ack in acks] == ["accepted"]
    executor.signal(signal.SIGTERM)
    assert executor.wait() == 0
    stderr = executor.stderr()
    lines = _json_lines(stderr)
    with_traceback = [line for line in lines if "Traceback" in str(line)]
    assert with_traceback == [], with_traceback
    assert "Traceback" not in stderr and "ExceptionGroup" not in stderr
    births = [line for line in lines if "could not start" in str(line["event"])]
    expected = {"shadow signing worker could not start: shadow fires sign on the loop"}
    if not presign:
        expected.add("signing-ahead worker could not start: orders sign inline on the loop")
    assert {str(line["event"]) for line in births} == expected
    assert len(births) == len(expected)
    assert all(line["level"] == "warning" for line in births)
    resolved = [line for line in lines if line["event"] == "order resolved"]
    assert [line["status"] for line in resolved] == ["filled"]
    server, _ = exit_counters(executor.stderr_lines())
    assert (server["presigned"], server["signed_inline"]) == (0, 1)
