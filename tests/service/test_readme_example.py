"""The README's client example runs as written against ``dev.py serve`` and ends in a filled order.

The code block is read from README.md itself, so the README cannot drift from the code. The one
change made to it is the socket path: dev.py's default (``/tmp/trio-executor/executor.sock``,
shared by everything on the machine) becomes a folder of the test's own.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.dev import DevServe, copied_checkout, run_dev
from tests.support.processes import EXIT_TIMEOUT_S, wait_until_accepting

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEFAULT_SOCKET = "/tmp/trio-executor/executor.sock"
"""dev.py serve's socket, as the README's example names it."""

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def readme_example() -> str:
    """The README's one Python code block."""
    (block,) = PYTHON_BLOCK.findall(README.read_text())
    return str(block)


def test_the_example_names_dev_serves_socket() -> None:
    """The example connects to the socket dev.py serve listens on, once (what the test swaps)."""
    dev_script = (ROOT / "dev.py").read_text()
    assert f'DEFAULT_SOCKET = "{DEFAULT_SOCKET}"' in dev_script
    assert readme_example().count(f'"{DEFAULT_SOCKET}"') == 1


def test_the_readme_example_runs_and_its_order_fills(short_dir: Path) -> None:
    """Run as a script beside ``dev.py serve`` (its defaults: the in-process fake), the example
    prints ``accepted``, and ``dev.py orders`` then shows its order filled by the fake."""
    checkout = copied_checkout(short_dir / "checkout")
    socket_path = short_dir / "run" / "executor.sock"
    script = short_dir / "wake.py"
    script.write_text(readme_example().replace(DEFAULT_SOCKET, str(socket_path)))
    server = DevServe(short_dir, "--socket", socket_path, script=checkout)
    try:
        wait_until_accepting(server, socket_path)
        ran = subprocess.run(
            [sys.executable, str(script)],
            cwd=short_dir,
            capture_output=True,
            text=True,
            timeout=EXIT_TIMEOUT_S * 3,
            check=False,
        )
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "accepted\n", "")
        server.signal(signal.SIGTERM)  # the grace lets the order in flight finish
        assert server.wait() == 0
    finally:
        server.kill()
    shown = run_dev("orders", "--json", cwd=short_dir, script=checkout)
    assert shown.returncode == 0, shown.stderr
    orders = json.loads(shown.stdout)["orders"]
    assert len(orders) == 1
    assert orders[0]["correlation_id"].startswith("readme-")
    assert orders[0]["status"] == "filled" and orders[0]["kalshi_order_id"]
