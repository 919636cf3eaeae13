"""The raw system interfaces the isolation layers share: libc through ctypes, and what
/proc/self says about this process.

Only the standard library is used; ctypes covers the few syscalls Python 3.11 does not wrap
(unshare, setns, mount, prctl, capset, and the Landlock calls through ``syscall``). Every wrapper
raises OSError with the errno, as ``os`` functions do. Constants that only one layer uses live
with that layer (Landlock's in ``landlock``, the capability structs in ``identity``).
"""

from __future__ import annotations

import ctypes
import errno
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

CAP_SYS_ADMIN = 21


def _load_libc() -> ctypes.CDLL | None:
    # A private handle: argtypes set here do not leak into other users of ctypes.CDLL(None).
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl.restype = ctypes.c_int
    libc.unshare.argtypes = [ctypes.c_int]
    libc.unshare.restype = ctypes.c_int
    libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.setns.restype = ctypes.c_int
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.mount.restype = ctypes.c_int
    libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    libc.capset.restype = ctypes.c_int
    return libc


_LIBC = _load_libc()


def _libc() -> ctypes.CDLL:
    if _LIBC is None:
        raise OSError(errno.ENOSYS, "libc cannot be loaded through ctypes")
    return _LIBC


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _check(_libc().prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), f"unshare({flags:#x})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else os.fsencode(value)

    _check(_libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _syscall(number: int, *args: ctypes.c_long | ctypes.c_void_p | ctypes.c_size_t | ctypes.c_uint32 | ctypes.c_int) -> int:
    # Arguments are passed as explicit ctypes objects: syscall() is variadic, and a bare Python int
    # would be passed as a 32-bit int.
    return _check(_libc().syscall(ctypes.c_long(number), *args), f"syscall {number}")


def _status_field(name: str) -> str | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _effective_caps() -> int:
    value = _status_field("CapEff")
    return int(value, 16) if value else 0


def _has_cap(cap: int) -> bool:
    return bool(_effective_caps() >> cap & 1)
