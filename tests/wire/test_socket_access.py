"""``--socket-mode`` and ``--socket-group``: what is accepted, what is refused and why, the bits
the bound socket gets, and the warning for a group kept out by a folder above the socket."""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path

import pytest

from executor.wire.socket_access import (
    SocketAccess,
    SocketAccessError,
    group_reach_problem,
    parse_socket_mode,
    resolve_socket_group,
    socket_access,
)
from executor.wire.unixsocket import prepare_unix_socket


def other_group() -> int:
    """A group that exists, is not this process's own, and that it may give a file to."""
    candidates = [entry.gr_gid for entry in grp.getgrall()] if os.geteuid() == 0 else os.getgroups()
    for gid in candidates:
        if gid not in (0, os.getegid()):
            try:
                grp.getgrgid(gid)
            except KeyError:
                continue
            return gid
    pytest.skip("needs root or a supplementary group: no other group to give the socket to")


@pytest.mark.parametrize(("text", "mode"), [("0600", 0o600), ("660", 0o660), ("0640", 0o640)])
def test_a_permission_mode_is_read_as_octal(text: str, mode: int) -> None:
    """Three or four octal digits are the mode they spell."""
    assert parse_socket_mode(text) == mode


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("rw-rw----", "octal permission mode"),
        ("0668", "octal permission mode"),
        ("", "octal permission mode"),
        ("066000", "octal permission mode"),
        ("4660", "not a permission mode"),
        ("1660", "not a permission mode"),
        ("0666", "every user on the machine"),
        ("0602", "every user on the machine"),
    ],
)
def test_a_mode_that_is_not_a_socket_permission_mode_is_refused(text: str, words: str) -> None:
    """Non-octal text, set-id or sticky bits, and any bit for other users are one-line refusals."""
    with pytest.raises(SocketAccessError, match=words) as refused:
        parse_socket_mode(text)
    assert "\n" not in str(refused.value)


def test_a_group_is_found_by_name_and_by_number() -> None:
    """An existing group resolves to its id and name whichever way it is written."""
    entry = grp.getgrgid(os.getegid())
    assert resolve_socket_group(entry.gr_name) == (entry.gr_gid, entry.gr_name)
    assert resolve_socket_group(str(entry.gr_gid)) == (entry.gr_gid, entry.gr_name)


def test_a_group_that_does_not_exist_is_refused() -> None:
    """A name or a number the group database does not hold is refused, naming it."""
    taken = {entry.gr_gid for entry in grp.getgrall()}
    unused = next(gid for gid in range(60_000, 65_000) if gid not in taken)
    for text in ("no-such-group-here", str(unused), "9" * 30):
        with pytest.raises(SocketAccessError, match=f"no group '{text}'"):
            resolve_socket_group(text)


def test_a_group_this_process_is_not_in_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that is not root and not in the group cannot give it the socket: refused; the
    same group is accepted from a member (the negative twin)."""
    entry = grp.getgrgid(os.getegid())
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: entry.gr_gid + 1)
    monkeypatch.setattr(os, "getgroups", lambda: [])
    with pytest.raises(SocketAccessError, match=f"not in group {entry.gr_name}"):
        resolve_socket_group(entry.gr_name)
    monkeypatch.setattr(os, "getgroups", lambda: [entry.gr_gid])
    assert resolve_socket_group(entry.gr_name) == (entry.gr_gid, entry.gr_name)


def test_a_group_with_a_mode_that_gives_groups_nothing_is_refused() -> None:
    """``--socket-group`` with the default 0600 would change nothing: refused, saying so."""
    with pytest.raises(SocketAccessError, match="gives the group nothing"):
        socket_access(0o600, (100, "users"))
    assert socket_access(0o660, (100, "users")) == SocketAccess(0o660, 100, "users")
    assert socket_access(0o640, None) == SocketAccess(0o640)


async def test_the_prepared_socket_has_the_group_and_mode_asked_for(short_dir: Path) -> None:
    """Bound with a group and 0660, the socket carries both once published; by default it is
    0600 in the process's own group."""
    gid = other_group()
    asked = SocketAccess(0o660, gid, grp.getgrgid(gid).gr_name)
    await prepare_unix_socket(short_dir / "g.sock", asked).publish().aclose()
    status = os.lstat(short_dir / "g.sock")
    assert (stat.S_IMODE(status.st_mode), status.st_gid) == (0o660, gid)
    await prepare_unix_socket(short_dir / "d.sock").publish().aclose()
    status = os.lstat(short_dir / "d.sock")
    assert (stat.S_IMODE(status.st_mode), status.st_gid) == (0o600, os.getegid())


def test_a_folder_closed_to_the_group_is_named(short_dir: Path) -> None:
    """A 0700 folder above a group socket keeps the group out, and the problem names it; 0710
    in that group, or 0701, lets the group through."""
    gid = other_group()
    folder = short_dir / "run"
    folder.mkdir()
    os.chown(short_dir, -1, gid)
    os.chmod(short_dir, 0o710)
    socket_path = folder / "x.sock"
    access = SocketAccess(0o660, gid, grp.getgrgid(gid).gr_name)
    os.chmod(folder, 0o700)
    problem = group_reach_problem(socket_path, access)
    assert problem is not None and f"cannot pass through {folder} (drwx------" in problem
    os.chmod(folder, 0o701)
    assert group_reach_problem(socket_path, access) is None
    os.chmod(folder, 0o710)
    assert group_reach_problem(socket_path, access) is not None  # 0710, but not in that group
    os.chown(folder, -1, gid)
    assert group_reach_problem(socket_path, access) is None


def test_an_owner_only_socket_has_no_group_to_warn_about(short_dir: Path) -> None:
    """With no group bits nobody but the owner is meant to connect: no warning, whatever the
    folders."""
    os.chmod(short_dir, 0o700)
    assert group_reach_problem(short_dir / "x.sock", SocketAccess()) is None
