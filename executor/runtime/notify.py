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

Never blocking: the socket is non-blocking, so a send to a peer whose queue is full fails at once
instead of stalling the event loop. A failed send is counted (``failed``) and logged once, never
raised: a lost notification must not stop an executor that is otherwise fine. Without
``NOTIFY_SOCKET`` every call is a no-op costing one attribute test.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping
from typing import Final

import structlog

log = structlog.get_logger()

NOTIFY_SOCKET_ENV: Final = "NOTIFY_SOCKET"
"""The variable systemd sets for a ``Type=notify`` service (sd_notify(3))."""

MAX_STATUS_CHARS: Final = 200
"""Longest ``STATUS=`` text sent; ``systemctl status`` shows one line, and a datagram must stay
well below the socket's size limit."""


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
        self._target: str | bytes | None = None
        self._socket: socket.socket | None = None
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
        """``STATUS=text``: what the executor is doing now (one line)."""
        self.send(f"STATUS={_one_line(text)}")

    def ready(self, status: str | None = None) -> None:
        """``READY=1`` (with a ``STATUS=`` line in the same datagram when given)."""
        if status is None:
            self.send("READY=1")
        else:
            self.send("READY=1", f"STATUS={_one_line(status)}")

    def stopping(self, status: str | None = None) -> None:
        """``STOPPING=1``: an orderly shutdown has begun."""
        if status is None:
            self.send("STOPPING=1")
        else:
            self.send("STOPPING=1", f"STATUS={_one_line(status)}")

    def send(self, *assignments: str) -> bool:
        """Send ``assignments`` as one datagram; whether it was sent. Never raises, never blocks."""
        if self._target is None:
            return False
        payload = "\n".join(assignments).encode("utf-8", errors="replace")
        try:
            if self._socket is None:
                self._socket = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                )
                self._socket.setblocking(False)
            self._socket.sendto(payload, self._target)
        except OSError as error:
            self.failed += 1
            if self.failed == 1:
                log.warning(
                    "cannot notify the service manager",
                    notify_socket=self.address,
                    error=error.strerror or str(error),
                )
            return False
        self.sent += 1
        return True

    def close(self) -> None:
        """Close the socket (a later send opens a new one)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None


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


__all__ = ["NOTIFY_SOCKET_ENV", "ServiceNotifier"]
