"""The exit statuses the executor's commands end with, defined once for all of them.

``executor serve`` (``executor.cli``), ``executor killswitch`` (``executor.trading.kill_command``),
``executor stats`` and ``executor orders`` (``executor.stats``) and the offline kill
(``executor.exchange.book.offline_kill``) share these three; a command with a meaning of its own
(``killswitch status``'s "engaged") names it beside its command. docs/operations/configuration.md,
"Exit status", is the reader's table.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
"""The command did what it was asked."""

EXIT_FAILURE: Final = 1
"""A runtime failure: something the command met could not be used (another executor holds the
socket, the file system, the database, a port, the exchange), or it failed while running."""

EXIT_USAGE: Final = 2
"""A usage or configuration error: a flag, a ``KALSHI_*`` variable or a file one of them names is
wrong; running the same command again fails the same way."""


__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE"]
