"""The fake exchange as a process for one benchmark invocation: ``python -m executor.fake``.

:class:`FakeExchangeProcess` starts it on a free port with a balance no run can spend, reads the
one JSON line it prints once it serves (:class:`FakeExchangeInfo`: its URL, key id, key and CA
files), and stops it and removes its credentials on exit. The fire-path runs
(``bench.scenarios.fire``) and the order-wire A/B (``bench.experiments.order_wire``) both point at
it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Final

from bench.harness.processes import BenchError

FAKE_BALANCE_CENTS: Final = 10**12
"""The fake account's balance (cents): no fill is ever refused for lack of money in a run."""
FAKE_READY_TIMEOUT_S: Final = 30.0
"""How long the fake may take to print its address (s): key and CA generation, imports."""


@dataclasses.dataclass(frozen=True)
class FakeExchangeInfo:
    """What the fake prints once it serves."""

    base_url: str
    key_id: str
    private_key_path: str
    ca_file: str


class FakeExchangeProcess:
    """``python -m executor.fake`` for one invocation; a context manager that stops it."""

    def __init__(self) -> None:
        self._directory = tempfile.mkdtemp(prefix="bench-fake-")
        command = [sys.executable, "-m", "executor.fake", "--port", "0"]
        command += ["--dir", self._directory, "--balance-cents", str(FAKE_BALANCE_CENTS)]
        self._stderr = open(os.path.join(self._directory, "stderr.txt"), "wb")  # noqa: SIM115
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self.info = self._read_info()

    def _read_info(self) -> FakeExchangeInfo:
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], FAKE_READY_TIMEOUT_S)
        line = self._process.stdout.readline() if ready else b""
        try:
            fields = json.loads(line)
            return FakeExchangeInfo(
                fields["base_url"], fields["key_id"], fields["private_key_path"], fields["ca_file"]
            )
        except (ValueError, KeyError, TypeError):
            self.stop()
            raise BenchError(f"the fake exchange did not start: {line[:200]!r}") from None

    def place(self, cpus: frozenset[int]) -> None:
        """Run the fake on ``cpus`` from now on (empty: every CPU this harness may use).

        A pinned run puts the fake with the clients, off the executor's CPU: it stands in for an
        exchange on another machine, so its work answering an order must not run where the
        executor's next line would (measured: with the fake free to run there, one real order in
        five waited 1.3-2.6 ms inside its own ``send``, docs/performance/notebook/ 2026-12-02).
        Affinity is per thread, so every thread it has now is moved; threads it starts later inherit
        the mask.
        """
        mask = cpus or frozenset(os.sched_getaffinity(0))
        task_dir = f"/proc/{self._process.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                os.sched_setaffinity(int(tid), mask)
            except ProcessLookupError:
                continue  # the thread ended since the listing

    def __enter__(self) -> FakeExchangeProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM, wait, remove its credentials."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()
        shutil.rmtree(self._directory, ignore_errors=True)
