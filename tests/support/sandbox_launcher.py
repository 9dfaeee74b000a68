"""Load a unit's seccomp restrictions (``tests/support/sandbox.py``) and ``exec`` a command.

Usage: ``python -I sandbox_launcher.py SANDBOX_JSON COMMAND...``. Standard library only: it runs
before the command, with nothing of the project imported. The permissive filters (EPERM and
friends) are loaded first, the allow list last, since loading a filter is itself a system call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import mmap
import os
import sys
from typing import Any

ACT_KILL_PROCESS = 0x8000_0000
ACT_ALLOW = 0x7FFF_0000
CMP_EQ = 4
CMP_GE = 5
CMP_MASKED_EQ = 7
SHM_EXEC = 0o100000
NAMESPACE_FLAGS = (
    0x0002_0000,  # CLONE_NEWNS
    0x0200_0000,  # CLONE_NEWCGROUP
    0x0400_0000,  # CLONE_NEWUTS
    0x0800_0000,  # CLONE_NEWIPC
    0x1000_0000,  # CLONE_NEWUSER
    0x2000_0000,  # CLONE_NEWPID
    0x4000_0000,  # CLONE_NEWNET
    0x0000_0080,  # CLONE_NEWTIME
)
FAMILY_LIMIT = 64
"""Address family numbers beyond Linux's (AF_MAX is 46) are refused as a block."""


def act_errno(code: int) -> int:
    """libseccomp's SCMP_ACT_ERRNO(code)."""
    return 0x0005_0000 | (code & 0xFFFF)


class Compare(ctypes.Structure):
    """libseccomp's ``struct scmp_arg_cmp``."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class Filter:
    """One libseccomp filter context for the native architecture."""

    def __init__(self, library: Any, default_action: int) -> None:
        self._lib = library
        self._ctx = library.seccomp_init(default_action)
        if not self._ctx:
            raise OSError("seccomp_init failed")

    def add(self, action: int, call: str, *compares: tuple[int, int, int, int]) -> None:
        """A rule for ``call`` (ignored when this architecture has no such call)."""
        number = self._lib.seccomp_syscall_resolve_name(call.encode())
        if number < 0:
            return
        array = (Compare * max(1, len(compares)))(*(Compare(*compare) for compare in compares))
        result = self._lib.seccomp_rule_add_array(self._ctx, action, number, len(compares), array)
        if result < 0:
            raise OSError(-result, f"seccomp rule for {call}: {os.strerror(-result)}")

    def load(self) -> None:
        """Load the filter into this process (inherited by everything it ``exec``s)."""
        result = self._lib.seccomp_load(self._ctx)
        if result < 0:
            raise OSError(-result, f"seccomp_load: {os.strerror(-result)}")


def library() -> Any:
    """libseccomp, with the signatures used here."""
    name = ctypes.util.find_library("seccomp")
    if name is None:
        raise OSError("libseccomp is not installed")
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(Compare),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    return lib


def load(sandbox: dict[str, Any]) -> None:
    """Build and load every filter ``sandbox`` asks for."""
    lib = library()
    if sandbox["memory_deny_write_execute"]:
        mdwe = Filter(lib, ACT_ALLOW)
        write_execute = mmap.PROT_WRITE | mmap.PROT_EXEC
        mdwe.add(act_errno(errno.EPERM), "mmap", (2, CMP_MASKED_EQ, write_execute, write_execute))
        for call in ("mprotect", "pkey_mprotect"):
            mdwe.add(
                act_errno(errno.EPERM), call, (2, CMP_MASKED_EQ, mmap.PROT_EXEC, mmap.PROT_EXEC)
            )
        mdwe.add(act_errno(errno.EPERM), "shmat", (2, CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC))
        mdwe.load()
    if sandbox["address_families"]:
        families = Filter(lib, ACT_ALLOW)
        refused = act_errno(errno.EAFNOSUPPORT)
        for family in range(FAMILY_LIMIT):
            if family not in sandbox["address_families"]:
                families.add(refused, "socket", (0, CMP_EQ, family, 0))
        families.add(refused, "socket", (0, CMP_GE, FAMILY_LIMIT, 0))
        families.load()
    if sandbox["restrict_namespaces"]:
        namespaces = Filter(lib, ACT_ALLOW)
        for flag in NAMESPACE_FLAGS:
            for call in ("clone", "unshare"):
                namespaces.add(act_errno(errno.EPERM), call, (0, CMP_MASKED_EQ, flag, flag))
        namespaces.add(act_errno(errno.EPERM), "setns")
        namespaces.add(act_errno(errno.ENOSYS), "clone3")
        namespaces.load()
    allow_list = Filter(lib, ACT_KILL_PROCESS)
    for call in sandbox["allowed_calls"]:
        allow_list.add(ACT_ALLOW, call)
    allow_list.load()


def main() -> None:
    """Load the sandbox of ``argv[1]`` and become ``argv[2:]``."""
    load(json.loads(sys.argv[1]))
    os.execv(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
