"""Who may connect to the executor's socket: its mode and its group.

``executor serve --socket-mode 0660 --socket-group trio-poller`` lets a poller that runs as
another user, in group ``trio-poller``, connect. Anything that can connect can make the executor
place orders, so the default stays owner-only (0600), other users never get the socket, and a
group is only ever given access on purpose. The socket is bound with these permissions before it
is reachable (``executor.wire.unixsocket``); this module parses and checks them, and says when a
folder above the socket keeps the group out.

Cancellation: nothing here awaits.
"""

from __future__ import annotations

import grp
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_SOCKET_MODE: Final = 0o600
"""Owner read/write only: the spec's default (SERVICE.md, "Socket ... permissions")."""

PERMISSION_BITS: Final = 0o777
"""The bits a ``--socket-mode`` may set: set-id and sticky bits mean nothing on a socket."""

OTHERS_BITS: Final = 0o007
"""Bits for users outside the owner and the group: never given (a group does that job on purpose,
where "others" would be every account on the machine)."""

GROUP_BITS: Final = 0o070


class SocketAccessError(ValueError):
    """A ``--socket-mode`` or ``--socket-group`` that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class SocketAccess:
    """The socket's permission bits and, when given, the group it belongs to."""

    mode: int = DEFAULT_SOCKET_MODE
    group_id: int | None = None
    """The group the socket is given to; None leaves the group the file system picks (the
    process's group, or the folder's with a set-group-id folder)."""
    group_name: str = ""
    """The group's name, for messages (its number when the group database has no name)."""

    def describe(self) -> str:
        """The mode and group as an operator would write them, e.g. ``0660 group trio-poller``."""
        group = f" group {self.group_name}" if self.group_id is not None else ""
        return f"{self.mode:04o}{group}"


OWNER_ONLY: Final = SocketAccess()
"""The default: 0600, the group left as the file system picks it."""


def parse_socket_mode(text: str) -> int:
    """``--socket-mode``: octal permission bits, e.g. ``0660`` or ``660``.

    Raises:
        SocketAccessError: not octal digits, bits beyond 0777, or any bit for other users.
    """
    digits = text.strip()
    if not digits or len(digits) > 4 or any(char not in "01234567" for char in digits):
        raise SocketAccessError(f"must be an octal permission mode such as 0660, got {text!r}")
    mode = int(digits, 8)
    if mode & ~PERMISSION_BITS:
        raise SocketAccessError(
            f"{text} is not a permission mode: set-user-id, set-group-id and sticky bits "
            "mean nothing on a socket (e.g. 0660)"
        )
    if mode & OTHERS_BITS:
        raise SocketAccessError(
            f"{text} gives every user on the machine the socket, and anything that connects "
            "can place orders: give a group access instead (e.g. 0660 with --socket-group)"
        )
    return mode


def resolve_socket_group(text: str) -> tuple[int, str]:
    """``--socket-group``: a group name or number that exists, and that this process may give a
    file to (it is in the group, or it is root). Returns ``(group id, name)``.

    Raises:
        SocketAccessError: no such group, or the process is not a member of it.
    """
    name = text.strip()
    try:
        entry = grp.getgrgid(int(name)) if name.isdigit() else grp.getgrnam(name)
    except (KeyError, OverflowError):
        raise SocketAccessError(f"no group {text!r} on this machine") from None
    gid = entry.gr_gid
    if os.geteuid() != 0 and gid != os.getegid() and gid not in os.getgroups():
        raise SocketAccessError(
            f"this process is not in group {entry.gr_name}, so it cannot give the socket to it "
            "(add its user to the group, e.g. systemd's SupplementaryGroups=)"
        )
    return gid, entry.gr_name


def socket_access(mode: int, group: tuple[int, str] | None) -> SocketAccess:
    """The access the two flags ask for, checked together.

    Raises:
        SocketAccessError: a group is named but the mode gives groups nothing.
    """
    if group is None:
        return SocketAccess(mode=mode)
    if not mode & GROUP_BITS:
        raise SocketAccessError(
            f"--socket-group {group[1]} gives the group nothing with --socket-mode {mode:04o} "
            "(e.g. --socket-mode 0660)"
        )
    return SocketAccess(mode=mode, group_id=group[0], group_name=group[1])


def group_reach_problem(socket_path: Path, access: SocketAccess) -> str | None:
    """Why the group the socket is open to cannot reach it, in one line, or None.

    A member of the group reaches the socket through every folder above it: the first folder
    with no search bit for that group (or for other users) keeps the group out, unless a member
    passes it as the folder's owner or by another group of theirs (hence a warning, not a
    refusal). None when the mode gives no group access or every folder lets the group through.
    """
    if not access.mode & GROUP_BITS:
        return None
    try:
        gid = access.group_id if access.group_id is not None else os.stat(socket_path).st_gid
    except OSError:
        return None
    for folder in reversed(socket_path.absolute().parents):
        try:
            status = os.stat(folder)
        except OSError as error:
            return f"cannot check {folder}: {error.strerror}"
        mode = status.st_mode
        if mode & stat.S_IXOTH or (status.st_gid == gid and mode & stat.S_IXGRP):
            continue
        return (
            f"group {_group_name(gid)} cannot pass through {folder} "
            f"({stat.filemode(mode)}, group {_group_name(status.st_gid)}): its members cannot "
            "reach the socket unless they own that folder or another of their groups may"
        )
    return None


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


__all__ = [
    "DEFAULT_SOCKET_MODE",
    "OWNER_ONLY",
    "SocketAccess",
    "SocketAccessError",
    "group_reach_problem",
    "parse_socket_mode",
    "resolve_socket_group",
    "socket_access",
]
