"""The operator's signals: SIGINT and SIGTERM turned into the server's orderly shutdown.

The first signal asks for an orderly shutdown (stop accepting, finish in-flight frames, give fires
the grace period); a second one cuts the grace short. A signal that arrives before the task is
listening (the executor is still starting) is remembered by :meth:`ShutdownSignals.note_early`
from a plain ``signal.signal`` handler and acted on as soon as the task starts, so a harness that
stops the executor the moment its socket appears still gets an orderly exit.

A repeat of the first signal within ``SIGNAL_ECHO_S`` is the same request delivered twice, not a
second one: ``timeout(1)`` signals its child and then its whole process group, so the executor it
runs receives SIGTERM twice within a millisecond, and a person pressing Ctrl-C twice is far slower.

One more: SIGUSR1 is the word of ``executor group reset`` that the exchange's order group is open
again (:func:`serve_group_resets`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Final

import structlog
import trio

log = structlog.get_logger()

GROUP_RESET_SIGNAL: Final = signal.SIGUSR1
"""What ``executor group reset`` sends the executor serving its database once the exchange has
reset the order group: the one way a running executor without the stream hears the reset. Until
the order path listens (start-up) it is ignored (``executor.cli``), never the default action,
which would end the process; a halt cannot be heard before the order path runs anyway."""

SIGNAL_ECHO_S: Final = 0.1
"""A repeat of the first signal this soon after it (seconds) is an echo of it, ignored. Senders
that signal a process and then its group do it within microseconds; a guess with a wide margin."""


class ShutdownSignals:
    """Watches SIGINT/SIGTERM for one server.

    Args:
        request_shutdown: begins the orderly shutdown (idempotent).
        cut_grace_short: cancels in-flight frames and fires now.
        stopping: set once a shutdown has begun (by a signal or otherwise).
        grace_s: the grace period, for the log line.
    """

    def __init__(
        self,
        request_shutdown: Callable[[], None],
        cut_grace_short: Callable[[], None],
        stopping: trio.Event,
        grace_s: float,
    ) -> None:
        self._request_shutdown = request_shutdown
        self._cut_grace_short = cut_grace_short
        self._stopping = stopping
        self._grace_s = grace_s
        self._early: list[int] = []

    def note_early(self, signum: int) -> None:
        """Remember a signal that arrived before :meth:`watch` was listening.

        Safe to call from a plain ``signal.signal`` handler, even before ``trio.run`` has started:
        it only records the signal.
        """
        self._early.append(signum)

    async def watch(self, scope: trio.CancelScope, *, task_status: trio.TaskStatus[None]) -> None:
        """Act on every SIGINT/SIGTERM until ``scope`` is cancelled (for ``nursery.start``).

        Cancellation: the signal handlers Trio installed are restored when ``scope`` ends.
        """
        with scope, trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            first: tuple[int, float] | None = None  # the first signal and when it was read
            if self._early:
                name = signal.Signals(self._early[0]).name
                log.info("shutdown requested during start-up", signal=name)
                first = (self._early[0], trio.current_time())
                self._request_shutdown()
            async for signum in signals:
                name = signal.Signals(signum).name
                now = trio.current_time()
                if first is None:
                    first = (signum, now)
                elif first[0] == signum and now - first[1] < SIGNAL_ECHO_S:
                    log.debug("the same signal again at once: one request", signal=name)
                    continue
                if not self._stopping.is_set():
                    log.info("shutdown requested", signal=name, grace_s=self._grace_s)
                    self._request_shutdown()
                else:
                    log.warning("second signal: cutting the grace period short", signal=name)
                    self._cut_grace_short()


async def serve_group_resets(
    on_reset: Callable[[], None], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Call ``on_reset`` at each :data:`GROUP_RESET_SIGNAL` until cancelled (``nursery.start``).

    Cancellation: the handler that was in place before (ignore, in the executor) comes back.
    """
    with trio.open_signal_receiver(GROUP_RESET_SIGNAL) as signals:
        task_status.started()
        async for _ in signals:
            on_reset()
