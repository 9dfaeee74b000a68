"""Background load as a configuration: N processes spinning on the CPUs for a whole invocation.

``python -m bench --background-load N`` starts N spinners before the first run and stops them
after the last, so every run of every executor competes with the same N CPU hogs (issue 24: "with
two processes spinning on the two cores"). They are unpinned and at the default priority, so the
scheduler shares each CPU between them and the benchmark's own processes; the description goes
into the printed output and ``machine.txt``. A spinner checks every few milliseconds that the
harness that started it is still its parent and exits when it is not, so a killed harness leaves
no hog behind.

``python -m bench.harness.background`` is the spinner itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import TracebackType
from typing import Final

SPIN_COMMAND: Final = (sys.executable, "-m", "bench.harness.background")
"""What each background process runs: this module's ``spin``."""

SPINS_PER_PARENT_CHECK: Final = 100_000
"""Empty loop passes between two checks of the parent (passes): a few milliseconds of CPU on
these machines, so an orphaned spinner exits within that, and the check costs nothing measurable."""

STOP_TIMEOUT_S: Final = 10.0
"""How long a spinner may take to exit after SIGTERM before it is killed (s)."""


def spin(parent: int) -> None:
    """Use a whole CPU until ``parent`` is no longer this process's parent."""
    while os.getppid() == parent:
        for _ in range(SPINS_PER_PARENT_CHECK):
            pass


class BackgroundLoad:
    """``processes`` spinners, started on entry and stopped (each by its own pid) on exit."""

    def __init__(self, processes: int) -> None:
        if processes < 0:
            raise ValueError(f"background load must be >= 0 processes, got {processes}")
        self.processes = processes
        self._children: list[subprocess.Popen[bytes]] = []

    @property
    def description(self) -> str:
        """One line naming the load, for the output and ``machine.txt``."""
        if not self.processes:
            return "none"
        return (
            f"{self.processes} spinning process{'es' if self.processes != 1 else ''}"
            f" ({' '.join(('python', *SPIN_COMMAND[1:]))}: a pure-Python busy loop, unpinned,"
            " default priority, for the whole invocation)"
        )

    @property
    def pids(self) -> list[int]:
        """The running spinners' process ids."""
        return [child.pid for child in self._children]

    def __enter__(self) -> BackgroundLoad:
        try:
            for _ in range(self.processes):
                self._children.append(
                    subprocess.Popen(
                        [*SPIN_COMMAND, str(os.getpid())],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,  # a Ctrl-C's traceback per spinner: noise
                    )
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Terminate every spinner and wait for it (SIGKILL past ``STOP_TIMEOUT_S``)."""
        for child in self._children:
            if child.poll() is None:
                child.terminate()
        for child in self._children:
            try:
                child.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._children.clear()


def main(argv: list[str] | None = None) -> int:
    """Spin until the parent named on the command line is gone."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m bench.harness.background PARENT_PID", file=sys.stderr)
        return 2
    spin(int(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
