"""The systemd unit's system-call restrictions applied to a process without systemd.

No systemd runs as PID 1 on the machines this suite runs on, so the unit's seccomp-based settings
are rebuilt here, from the unit's own lines and systemd's own group definitions
(``systemd-analyze syscall-filter``), with libseccomp (the library systemd builds them with), and
loaded in a small launcher that then ``exec``s the command, as systemd loads them before it
``exec``s ``ExecStart``. What is rebuilt, with systemd's actions:

- ``SystemCallFilter=`` lines in order (an allow list starts from ``@default``; ``~`` removes,
  a later plain line adds back); a call outside it kills the process (SIGSYS);
- ``SystemCallArchitectures=native``: a filter for the native architecture only (libseccomp
  kills a call made through another ABI);
- ``MemoryDenyWriteExecute=yes``: EPERM for ``mmap`` writable and executable at once, any
  ``mprotect``/``pkey_mprotect`` adding execute, ``shmat`` with ``SHM_EXEC``;
- ``RestrictAddressFamilies=``: ``socket()`` of any other family fails with EAFNOSUPPORT;
- ``RestrictNamespaces=yes``: EPERM for ``clone``/``unshare`` with a namespace flag and for
  ``setns``; ``clone3`` gets ENOSYS (its flags cannot be inspected), so the C library falls back.

The rest of the unit (file-system views, ``/proc`` options, users) is not rebuilt here.
"""

from __future__ import annotations

import configparser
import ctypes.util
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ADDRESS_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
"""The families the unit may name, by number (Linux's values)."""


@dataclass(frozen=True)
class Sandbox:
    """The restrictions one unit asks for, as the launcher builds them."""

    allowed_calls: list[str]
    memory_deny_write_execute: bool
    address_families: list[int] = field(default_factory=list)
    restrict_namespaces: bool = False


def available() -> str | None:
    """Why the sandbox cannot be built here, or None when it can."""
    if shutil.which("systemd-analyze") is None:
        return "needs systemd-analyze (Debian: apt-get install systemd)"
    if ctypes.util.find_library("seccomp") is None:
        return "needs libseccomp (Debian: libseccomp2)"
    return None


@functools.cache
def syscall_group(name: str) -> frozenset[str]:
    """Every system call of ``@name`` as this machine's systemd defines it, groups expanded."""
    output = subprocess.run(
        ["systemd-analyze", "syscall-filter", "--no-pager", name],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    calls: set[str] = set()
    for line in output.splitlines()[1:]:
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        calls |= syscall_group(entry) if entry.startswith("@") else {entry}
    return frozenset(calls)


def _names(words: str) -> set[str]:
    calls: set[str] = set()
    for word in words.split():
        calls |= syscall_group(word) if word.startswith("@") else {word}
    return calls


def sandbox_of(unit_text: str) -> Sandbox:
    """The restrictions of the unit's ``[Service]`` section."""
    lines = [line.strip() for line in unit_text.replace("\\\n", " ").splitlines()]
    filters = [line.partition("=")[2] for line in lines if line.startswith("SystemCallFilter=")]
    assert filters and not filters[0].startswith("~"), "the rebuild knows allow lists only"
    allowed = syscall_group("@default") | _names(filters[0])
    for words in filters[1:]:
        if words.startswith("~"):
            allowed -= _names(words[1:])
        else:
            allowed |= _names(words)
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string("\n".join(lines))
    service = parser["Service"]
    assert service.get("SystemCallArchitectures") == "native"
    families = service.get("RestrictAddressFamilies", "")
    return Sandbox(
        allowed_calls=sorted(allowed),
        memory_deny_write_execute=service.get("MemoryDenyWriteExecute") == "yes",
        address_families=[ADDRESS_FAMILIES[family] for family in families.split()],
        restrict_namespaces=service.get("RestrictNamespaces") == "yes",
    )


def sandboxed(sandbox: Sandbox, command: list[str]) -> list[str]:
    """``command`` run under ``sandbox``; as root also without any capability (the unit's empty
    ``CapabilityBoundingSet=``), through util-linux's ``setpriv``."""
    launcher = Path(__file__).with_name("sandbox_launcher.py")
    wrapped = [sys.executable, "-I", os.fspath(launcher), json.dumps(asdict(sandbox)), *command]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv is not None, "util-linux's setpriv is missing"
        wrapped = [setpriv, "--bounding-set=-all", "--inh-caps=-all", *wrapped]
    return wrapped
