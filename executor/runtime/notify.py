"""Readiness notification for a service manager (systemd's ``Type=notify``), standard library only.

When systemd starts a ``Type=notify`` unit it sets ``NOTIFY_SOCKET`` to the address of a datagram
socket and waits for ``READY=1`` before it calls the unit started (and before units ordered after
it start). The protocol is plain text: one datagram of newline-separated ``KEY=VALUE`` assignments.
This module sends:

- ``STATUS=...`` while starting (what the executor is doing: opening its database, warming the
  order path), shown by ``systemctl status``;
- ``READY=1`` once the socket is published at its path, so a poller ordered ``After=`` the
  executor finds it listening;
- ``STOPPING=1`` as soon as an orderly shutdown begins.

Addresses: an absolute path, or ``@name`` for a socket in Linux's abstract namespace (the ``@``
stands for a leading NUL byte). Anything else (``vsock:`` addresses, a relative path) is not
supported: the notifier is disabled with one warning, and systemd reports the start as timed out,
which names the problem better than a guess would.

Never blocking, and readiness never lost: the socket is non-blocking, so a send to a peer whose
queue is full fails at once instead of stalling the event loop. A ``STATUS=`` line that cannot be
sent is dropped and counted (``dropped``; the first drop is logged): it only says what the executor
is doing. ``READY=1`` and ``STOPPING=1`` may not be lost (a ``Type=notify`` unit whose readiness is
lost is killed at its start timeout), so when the peer's queue is full (systemd's notification
socket holds ``net.unix.max_dgram_qlen`` datagrams, 10 by default, and start-up sends more status
lines than that) they are handed to a thread of their own that retries, backing off, until sent or
``RELIABLE_DEADLINE_S`` has passed; in order, and status lines sent meanwhile are dropped so none
overtakes them. Any other failure (no socket at the address) is counted (``failed``) and logged
once, never raised: a lost notification must not stop an executor that is otherwise fine. Without
``NOTIFY_SOCKET`` every call is a no-op costing one attribute test.
"""

from __future__ import annotations

import errno
import os
import queue
import socket
import threading
import time
from collections.abc import MutableMapping
from typing import Final

import structlog

log = structlog.get_logger()

NOTIFY_SOCKET_ENV: Final = "NOTIFY_SOCKET"
"""The variable systemd sets for a ``Type=notify`` service (sd_notify(3))."""

MAX_STATUS_CHARS: Final = 200
"""Longest ``STATUS=`` text sent; ``systemctl status`` shows one line, and a datagram must stay
well below the socket's size limit."""

RELIABLE_DEADLINE_S: Final = 90.0
"""How long ``READY=1`` or ``STOPPING=1`` is retried (s): systemd's default start and stop
timeouts (``DefaultTimeoutStartSec``); past them the manager has given up on the unit anyway."""

RETRY_FIRST_S: Final = 0.005
RETRY_MAX_S: Final = 0.5
"""The retry thread's backoff (s): it doubles from the first to the last. A manager reads its
queue within milliseconds once it runs; a guess that keeps a stalled one from costing CPU."""

_QUEUE_FULL: Final = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS, errno.EINTR})
"""Errors that mean "not now" (the peer's queue or our buffer is full): worth retrying."""

EXIT_FLUSH_S: Final = 5.0
"""How long a process about to exit waits for a readiness datagram still being retried (s): its
exit tells the manager as much as ``STOPPING=1`` would, so a short wait is enough."""


class ServiceNotifier:
    """Sends sd_notify(3) datagrams to ``address``; a notifier without one does nothing.

    Args:
        address: ``NOTIFY_SOCKET``'s value (a path, or ``@name`` for the abstract namespace), or
            None for a disabled notifier.
    """

    def __init__(self, address: str | None) -> None:
        self.address = address or None
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        """``STATUS=`` lines not sent (the peer's queue was full, or a readiness line waited)."""
        self._target: str | bytes | None = None
        self._socket: socket.socket | None = None
        self._pending: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._waiting = 0
        """Readiness datagrams handed to the retry thread and not yet sent or given up on."""
        self._lock = threading.Lock()
        self._retrier: threading.Thread | None = None
        if self.address is None:
            return
        target = _socket_address(self.address)
        if target is None:
            log.warning(
                "NOTIFY_SOCKET is not a path or an @abstract name: no readiness notification",
                notify_socket=self.address,
            )
            self.address = None
            return
        self._target = target

    @classmethod
    def from_environment(cls, environ: MutableMapping[str, str]) -> ServiceNotifier:
        """The notifier ``NOTIFY_SOCKET`` asks for, removing the variable from ``environ``.

        Removing it keeps child processes (the shadow signing workers, a helper started later)
        from ever talking to the service manager in the executor's name.
        """
        return cls(environ.pop(NOTIFY_SOCKET_ENV, None))

    @property
    def enabled(self) -> bool:
        """Whether notifications go anywhere."""
        return self._target is not None

    def status(self, text: str) -> None:
        """``STATUS=text``: what the executor is doing now (one line); dropped and counted when
        it cannot be sent at once."""
        if self._target is None:
            return
        if self._waiting or not self.send(f"STATUS={_one_line(text)}", count_failure=False):
            self.dropped += 1
            if self.dropped == 1:
                log.warning(
                    "service manager not reading its notifications: status lines dropped",
                    notify_socket=self.address,
                )

    def ready(self, status: str | None = None) -> None:
        """``READY=1`` (with a ``STATUS=`` line in the same datagram when given); retried off the
        loop until sent when the peer's queue is full."""
        self._send_reliably("READY=1", status)

    def stopping(self, status: str | None = None) -> None:
        """``STOPPING=1``: an orderly shutdown has begun; retried like ``ready``."""
        self._send_reliably("STOPPING=1", status)

    def send(self, *assignments: str, count_failure: bool = True) -> bool:
        """Send ``assignments`` as one datagram; whether it was sent. Never raises, never blocks.

        ``count_failure`` False leaves a failure for the caller to count (a dropped status)."""
        if self._target is None:
            return False
        try:
            self._send_now(_payload(assignments))
        except OSError as error:
            if count_failure:
                self._count_failure(error)
            return False
        self._count_sent()
        return True

    def wait_sent(self, timeout_s: float) -> bool:
        """Block until the retry thread has nothing left (sent or given up), at most
        ``timeout_s``; whether it finished. For the end of the process, never the event loop."""
        retrier = self._retrier
        if retrier is None:
            return True
        self._pending.put(None)  # ends the thread once what is queued before it is done
        retrier.join(timeout_s)
        return not retrier.is_alive()

    def close(self) -> None:
        """Close the socket (a later send opens a new one); a readiness datagram still being
        retried keeps going on the retry thread's own socket."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _send_reliably(self, assignment: str, status: str | None) -> None:
        if self._target is None:
            return
        parts = (assignment,) if status is None else (assignment, f"STATUS={_one_line(status)}")
        payload = _payload(parts)
        if not self._waiting:
            try:
                self._send_now(payload)
            except OSError as error:
                if error.errno not in _QUEUE_FULL:
                    self._count_failure(error)
                    return
            else:
                self._count_sent()
                return
        with self._lock:
            self._waiting += 1
            if self._retrier is None or not self._retrier.is_alive():
                self._retrier = threading.Thread(
                    target=self._retry_pending, name="notify-retry", daemon=True
                )
                self._retrier.start()
        self._pending.put(payload)

    def _retry_pending(self) -> None:
        """The retry thread: each queued datagram in turn, until sent or past the deadline."""
        assert self._target is not None
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)
            while (payload := self._pending.get()) is not None:
                error = _retry(sock, payload, self._target)
                with self._lock:
                    self._waiting -= 1
                if error is None:
                    self._count_sent()
                else:
                    self._count_failure(error)

    def _send_now(self, payload: bytes) -> None:
        assert self._target is not None
        if self._socket is None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._socket.setblocking(False)
        self._socket.sendto(payload, self._target)

    def _count_sent(self) -> None:
        with self._lock:  # the retry thread counts too
            self.sent += 1

    def _count_failure(self, error: OSError) -> None:
        with self._lock:
            self.failed += 1
            first = self.failed == 1
        if first:
            log.warning(
                "cannot notify the service manager",
                notify_socket=self.address,
                error=error.strerror or str(error),
            )


def _retry(sock: socket.socket, payload: bytes, target: str | bytes) -> OSError | None:
    """Send ``payload`` on ``sock``, backing off while the peer's queue is full, for at most
    ``RELIABLE_DEADLINE_S``; None once sent, else the last error."""
    deadline = time.monotonic() + RELIABLE_DEADLINE_S
    delay = RETRY_FIRST_S
    while True:
        try:
            sock.sendto(payload, target)
        except OSError as error:
            if error.errno not in _QUEUE_FULL or time.monotonic() >= deadline:
                return error
            time.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
        else:
            return None


def _payload(assignments: tuple[str, ...]) -> bytes:
    return "\n".join(assignments).encode("utf-8", errors="replace")


def _socket_address(address: str) -> str | bytes | None:
    """The ``sendto`` address of a ``NOTIFY_SOCKET`` value, or None when it is not supported."""
    if address.startswith("@") and len(address) > 1:
        return b"\0" + os.fsencode(address[1:])
    if address.startswith("/"):
        return address
    return None


def _one_line(text: str) -> str:
    """``text`` on one line, bounded: a newline would start a new assignment."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_STATUS_CHARS else flat[: MAX_STATUS_CHARS - 3] + "..."


__all__ = ["EXIT_FLUSH_S", "NOTIFY_SOCKET_ENV", "RELIABLE_DEADLINE_S", "ServiceNotifier"]
