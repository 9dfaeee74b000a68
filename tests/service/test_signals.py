"""The signal task's echo window, in-process: which signals are one request and which are two.

``ShutdownSignals.watch`` listens with ``trio.open_signal_receiver`` and times signals with
``trio.current_time()``, so pytest-trio's ``mock_clock`` (time moves only when a test jumps it)
and ``autojump_clock`` place the second signal exactly inside or outside the 0.1 s echo window.
The signals are real ones, sent to this process with ``os.kill``; the receiver holds them, so no
default handler runs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio
import trio.testing

from executor.runtime.signals import SIGNAL_ECHO_S, ShutdownSignals

INSIDE_ECHO_S = SIGNAL_ECHO_S / 10
"""A gap well inside the echo window."""


@dataclass
class Calls:
    """What the signal task asked of the server, in order."""

    made: list[str] = field(default_factory=list)
    stopping: trio.Event = field(default_factory=trio.Event)

    def request_shutdown(self) -> None:
        self.made.append("shutdown")
        self.stopping.set()

    def cut_grace_short(self) -> None:
        self.made.append("cut")


@asynccontextmanager
async def watching(early: tuple[int, ...] = ()) -> AsyncIterator[Calls]:
    """A running ``ShutdownSignals.watch`` over a fresh :class:`Calls`, after ``early`` signals
    were noted as arriving during start-up."""
    calls = Calls()
    signals = ShutdownSignals(calls.request_shutdown, calls.cut_grace_short, calls.stopping, 5.0)
    for signum in early:
        signals.note_early(signum)
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        await nursery.start(signals.watch, scope)
        yield calls
        scope.cancel()


async def deliver(signum: int) -> None:
    """Send ``signum`` to this process and let the signal task act on it."""
    os.kill(os.getpid(), signum)
    await trio.testing.wait_all_tasks_blocked()


async def test_the_same_signal_again_inside_the_window_is_one_request(
    mock_clock: trio.testing.MockClock,
) -> None:
    """SIGTERM, then SIGTERM 0.01 s later: one shutdown request, the grace left alone."""
    async with watching() as calls:
        await deliver(signal.SIGTERM)
        mock_clock.jump(INSIDE_ECHO_S)
        await deliver(signal.SIGTERM)
    assert calls.made == ["shutdown"]


async def test_a_different_signal_inside_the_window_is_a_second_signal(
    mock_clock: trio.testing.MockClock,
) -> None:
    """SIGINT, then SIGTERM 0.01 s later, is two requests: the second cuts the grace short."""
    async with watching() as calls:
        await deliver(signal.SIGINT)
        mock_clock.jump(INSIDE_ECHO_S)
        await deliver(signal.SIGTERM)
    assert calls.made == ["shutdown", "cut"]


async def test_a_signal_during_start_up_opens_the_echo_window(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A SIGTERM noted during start-up and its echo 0.01 s after the task starts are one
    request."""
    async with watching(early=(signal.SIGTERM,)) as calls:
        mock_clock.jump(INSIDE_ECHO_S)
        await deliver(signal.SIGTERM)
    assert calls.made == ["shutdown"]


async def test_the_same_signal_after_the_window_is_a_second_signal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The negative twin: the start-up SIGTERM and a SIGTERM after the window are two requests."""
    async with watching(early=(signal.SIGTERM,)) as calls:
        await trio.sleep(SIGNAL_ECHO_S * 2)
        await deliver(signal.SIGTERM)
    assert calls.made == ["shutdown", "cut"]
