"""``executor group reset --telemetry-db D``: the order group opened again, from a shell.

When the exchange triggers this installation's order group by itself (more contracts matched in
15 s than its limit), a running executor refuses every real fire until the group is reset
(``executor.exchange.halts``). This resets the newest group the database records for this
exchange (``PUT /portfolio/order_groups/{id}/reset``), then tells the executor serving the
database, if one runs: it signals it (``GROUP_RESET_SIGNAL``), once sure the pid the database
names is alive and has that database open (:func:`process_state`), so the executor
sends again with or without its stream (``order_group_updates`` says it too). It works with or
without ``--kill-switch``, and whether or not an executor runs (a later start reuses the group).
"""

from __future__ import annotations

import enum
import os
import sqlite3
import sys
from pathlib import Path
from typing import Final

import trio

from executor.config.settings import Settings
from executor.exchange.book.order_group import OrderGroup
from executor.exchange.orders.transport import ExchangeEndpoint, ExchangeError, open_exchange
from executor.exchange.rate_limits import fetch_api_limits
from executor.recording.orders.groups import executor_pids, latest_order_group
from executor.runtime.exit_codes import EXIT_FAILURE, EXIT_OK
from executor.runtime.signals import GROUP_RESET_SIGNAL
from executor.signer import KalshiSigner

BUDGET_S: Final = 30.0
"""Longest the reset may take (seconds): the limits read and one write at a 10 s budget each,
with room; past it the command gives up with one line rather than hang a shell."""

PROG: Final = "executor group"
"""The command's name, at the head of its error lines."""


class ProcessState(enum.Enum):
    """What a pid is, as seen from here."""

    GONE = "gone"
    """No such process (or a zombie with nothing open)."""
    OTHER = "other"
    """A live process without the file open: not the file's executor."""
    UNKNOWN = "unknown"
    """Alive, but its open files cannot be read (another user's process)."""
    SERVING = "serving"
    """Alive, with the file open: the executor serving it."""


def process_state(pid: int, path: Path) -> ProcessState:
    """What ``pid`` is with respect to the file at ``path`` (which must exist; blocking).

    A pid read from the database may be stale (the process ended, the pid reused): it is the
    executor serving ``path`` only when alive AND one of its descriptors is that very file (the
    same device and inode, through ``/proc/PID/fd``: Linux only). The executor holds its database
    open for as long as it runs.
    """
    if pid <= 0:
        return ProcessState.GONE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ProcessState.GONE
    except PermissionError:
        return ProcessState.UNKNOWN
    wanted = os.stat(path)
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except FileNotFoundError:
        return ProcessState.GONE
    except PermissionError:
        return ProcessState.UNKNOWN
    for name in names:
        try:
            held = os.stat(fd_dir / name)  # follows the link to the open file itself
        except OSError:
            continue  # closed meanwhile, or a socket or pipe without a path
        if (held.st_dev, held.st_ino) == (wanted.st_dev, wanted.st_ino):
            return ProcessState.SERVING
    return ProcessState.OTHER


def _fail(text: str) -> int:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)
    return EXIT_FAILURE


async def reset_on_exchange(settings: Settings, signer: KalshiSigner, db_path: Path) -> int:
    """Reset the newest order group ``db_path`` records for this exchange.

    Returns:
        0 when the exchange accepted the reset and the executor serving ``db_path`` was told, or
        none runs (one line on stdout), 1 otherwise (one line on stderr: no database, no group
        recorded, the exchange unreachable or refusing, a running executor that cannot be told).
    """
    exchange = settings.exchange
    assert exchange.base_url is not None  # a real exchange always has one
    if not await trio.to_thread.run_sync(db_path.exists):
        return _fail(f"no database at {db_path}")
    try:
        recorded = await trio.to_thread.run_sync(latest_order_group, db_path, exchange.base_url)
    except sqlite3.Error as error:
        return _fail(f"cannot read {db_path}: {error}")
    if recorded is None:
        return _fail(f"no order group recorded for {exchange.base_url} in {db_path}")
    endpoint = ExchangeEndpoint(exchange.base_url, exchange.key_id, signer, exchange.ca_file)
    reset = False
    with trio.move_on_after(BUDGET_S) as budget:
        try:
            async with open_exchange(endpoint, prewarm=False, order_connections=1) as client:
                client.use_limits(await fetch_api_limits(client))
                group = OrderGroup(client.rest, recorded.order_group_id, recorded.contracts_limit)
                reset = await group.reset("executor group reset")
        except (ExchangeError, ValueError) as error:
            return _fail(f"the exchange cannot be reached: {error}")
    if budget.cancelled_caught:
        return _fail(f"the exchange did not answer within {BUDGET_S:g} s")
    if not reset:
        return _fail(f"order group {recorded.order_group_id} could not be reset (see the log line)")
    try:
        told, what = await trio.to_thread.run_sync(tell_the_executor, db_path)
    except (sqlite3.Error, OSError) as error:
        told, what = False, f"the executor's pid not readable in {db_path}: {error}"
    line = f"exchange: order group {recorded.order_group_id} reset; {what}"
    if not told:
        return _fail(f"{line} (restart it, or engage then release the kill switch)")
    print(line, flush=True)
    return EXIT_OK


def tell_the_executor(db_path: Path) -> tuple[bool, str]:
    """Signal the executor serving ``db_path`` that its group is open again (blocking).

    Returns:
        (True, what was done): the executor signalled, or none runs; (False, why not): a process
        the database names is alive but cannot be checked or signalled (another user's).

    Raises:
        sqlite3.Error: the database cannot be read. OSError: it is gone.
    """
    unchecked: list[int] = []
    for pid in executor_pids(db_path):
        state = process_state(pid, db_path)
        if state is ProcessState.UNKNOWN:
            unchecked.append(pid)
        if state is not ProcessState.SERVING:
            continue
        try:
            os.kill(pid, GROUP_RESET_SIGNAL)
        except ProcessLookupError:
            continue  # it ended just now: nothing left to tell
        except PermissionError:
            unchecked.append(pid)
            continue
        return True, f"the executor serving it (pid {pid}) told: real fires go out again"
    if unchecked:
        pids = ", ".join(map(str, unchecked))
        return False, f"process {pids} named in {db_path} cannot be checked or signalled"
    return True, f"no executor runs on {db_path} (a later start reuses the group)"


__all__ = [
    "BUDGET_S",
    "PROG",
    "ProcessState",
    "process_state",
    "reset_on_exchange",
    "tell_the_executor",
]
