"""docs/getting-started/demo.md as a newcomer follows it: every shell block of the page, run in
order, against the stand-alone fake exchange playing the demo exchange (started by the page's own
rehearsal block), ends in an order placed, read back, refused under the kill switch, and a clean
stop.

The blocks are read from the page, so the page and this test cannot drift. What the test changes
is what a reader changes by hand: the key id pasted in, the fake's printed values in the
rehearsal lines, the downloaded key put where step 2 expects it; and the reader's shell is a
fresh ``bash`` per block with ``HOME`` and ``XDG_RUNTIME_DIR`` of the test's own. A block's marker
(an HTML comment the site does not show) says how it runs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dev import DEV_TIMEOUT_S, ROOT, dev_environment, require_dev_environment
from tests.support.processes import Executor, exit_counters, wait_until_accepting
from tests.support.standalone_fake import running_fake

PAGE = ROOT / "docs" / "getting-started" / "demo.md"

SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
MARKED_BLOCK = re.compile(
    r"^<!-- recipe: ([a-z]+) -->\n```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL
)

KINDS = frozenset(
    {"checkout", "run", "background", "wake", "orders", "engaged", "fake", "rehearsal"}
)
"""How a block runs: ``checkout`` from the checkout, ``run``/``rehearsal`` to a 0 exit,
``background`` until the end (the executor), ``fake`` the exchange (started first), ``wake``
prints an acknowledgement, ``orders`` the table, ``engaged`` exits 2 (the switch's status)."""

ORDER_WAIT_S = 20.0
"""Longest wait for an order's row to reach its end (seconds, a busy machine)."""


def recipe() -> list[tuple[str, str]]:
    """The page's shell blocks, in order, each with its marker."""
    return [(kind, text) for kind, text in MARKED_BLOCK.findall(PAGE.read_text())]


def test_every_shell_block_of_the_page_is_walked() -> None:
    """Each ``sh`` block has a known marker, so none is left out of the walk unnoticed."""
    blocks = recipe()
    assert len(blocks) == len(SHELL_BLOCK.findall(PAGE.read_text()))
    assert {kind for kind, _ in blocks} <= KINDS
    assert [kind for kind, _ in blocks].count("background") == 1


class Reader:
    """A newcomer's shell: HOME, the runtime folder and the environment of the test's own."""

    def __init__(self, base: Path, substitutions: dict[str, str]) -> None:
        self.home = base / "h"
        self.runtime = base / "r"
        for folder in (self.home / "Downloads", self.runtime):
            folder.mkdir(parents=True)
        self.substitutions = substitutions
        venv_bin = str(Path(sys.prefix) / "bin")
        self.env = {
            **dev_environment(),
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
        }

    def text(self, block: str) -> str:
        """``block`` with the reader's own values in place of the page's placeholders."""
        for placeholder, value in self.substitutions.items():
            block = block.replace(placeholder, value)
        return block.replace(".venv/bin/activate", f"{Path(sys.prefix).name}/bin/activate")

    def run(self, block: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``block`` in a fresh bash, to its end."""
        return subprocess.run(
            ["bash", "-e", "-c", self.text(block)],
            cwd=cwd or self.home,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEV_TIMEOUT_S,
            check=False,
        )

    def command(self, block: str) -> list[str]:
        """``block`` as a process of its own (``exec``: the signal reaches the command itself,
        as Ctrl-C in its terminal would)."""
        assignments = [f"{name}={value}" for name, value in self.env.items()]
        return ["env", "-i", *assignments, "bash", "-c", "exec " + self.text(block).strip()]


@pytest.fixture
def fake_exchange(short_dir: Path) -> Iterator[tuple[dict[str, str], Reader]]:
    """The page's own ``fake`` block, running, and a reader with its values to paste."""
    require_dev_environment()
    (fake_block,) = [text for kind, text in recipe() if kind == "fake"]
    reader = Reader(short_dir, {})
    command = ["bash", "-c", "exec " + fake_block.strip()]
    with running_fake(command, cwd=reader.home, env=reader.env) as world:
        reader.substitutions = {
            "paste-your-key-id-here": world["key_id"],
            **{f"<{name}>": value for name, value in world.items()},
        }
        yield world, reader


def _orders_until(reader: Reader, block: str, wanted: str) -> str:
    """Run the ``orders`` block until its table shows ``wanted`` (an order resolves after its
    acknowledgement); the last table."""
    deadline = time.monotonic() + ORDER_WAIT_S
    while True:
        shown = reader.run(block)
        assert shown.returncode == 0, shown.stderr
        if wanted in shown.stdout or time.monotonic() > deadline:
            return shown.stdout
        time.sleep(0.1)


def test_the_demo_recipe_places_an_order_and_reads_it_back(
    short_dir: Path, fake_exchange: tuple[dict[str, str], Reader]
) -> None:
    """Walked block by block, the page's commands start a demo-mode executor against the fake,
    place one one-contract order that fills and is read back, refuse the next under the kill
    switch with its reason, and stop cleanly on Ctrl-C; no start-up warning about sizing, and
    the stream followed is the fake's."""
    world, reader = fake_exchange
    shutil.copy2(world["private_key_path"], reader.home / "Downloads" / "trio-executor-demo.txt")
    (reader.home / "Downloads" / "trio-executor-demo.txt").chmod(0o644)  # as a browser saves it
    rehearsal = [text for kind, text in recipe() if kind == "rehearsal"]
    executor: Executor | None = None
    expected_orders = ["filled", "kill switch engaged: first day: trying the switch"]
    try:
        for kind, block in recipe():
            if kind in ("fake", "rehearsal"):
                continue  # the fake runs already; its lines go in just before the executor starts
            if kind == "background":
                for lines in rehearsal:
                    assert reader.run(lines).returncode == 0
                executor = Executor(short_dir, name="demo", command=reader.command(block))
                wait_until_accepting(executor, reader.runtime / "trio-executor" / "executor.sock")
                continue
            ran = reader.run(block, cwd=ROOT if kind == "checkout" else None)
            if kind == "wake":
                assert (ran.returncode, ran.stdout.split()) == (0, ["accepted"]), ran.stderr
            elif kind == "orders":
                table = _orders_until(reader, block, expected_orders[0])
                assert expected_orders.pop(0) in table, table
                assert "KXBTCD-26AUG2917-T112750" in table
            elif kind == "engaged":
                assert ran.returncode == 2, ran.stderr
            else:
                assert ran.returncode == 0, f"{block}\n{ran.stderr}"
        assert expected_orders == []
        assert executor is not None
        executor.signal(signal.SIGINT)  # step 8: Ctrl-C
        assert executor.wait() == 0
    finally:
        if executor is not None:
            executor.kill()
    stderr = executor.stderr()
    assert "sizing and the risk gate disagree" not in stderr
    assert "exchange stream up" in stderr  # the fake's stream, from the URL it printed
    assert "one per market and side every 60 s" in stderr  # the cooldown, said at start-up
    assert "Traceback" not in stderr
    counters, _ = exit_counters(executor.stderr_lines())
    assert (counters["accepted"], counters["refused_kill_switch"]) == (2, 1)
    assert (reader.home / ".kalshi" / "demo.key").stat().st_mode & 0o077 == 0
