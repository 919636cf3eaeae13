"""Who the worker is once set up: uid/gid 65534 without capabilities, a parent-death signal,
and no_new_privs.

These come after everything that needs privileges. Root drops to nobody (setgroups([]),
setgid/setuid(65534), after the workdir is chowned to it, which needs CAP_CHOWN); a process that
is not root drops every capability instead. Root stays root (without capabilities) when 65534
could not read a readable path even after the mount namespace exposed it: a correct submission
must never become a load error because of the sandbox. PR_SET_PDEATHSIG is cleared by the
kernel on every change of euid/egid, so it is set after the drop. no_new_privs is required for
Landlock (restrict_self without CAP_SYS_ADMIN) and blocks regaining privileges through setuid
binaries or file capabilities.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterable

from grader.sandbox.isolation.model import Layer, _failed
from grader.sandbox.isolation.namespaces import _maps_id
from grader.sandbox.isolation.paths import _existing, _first_blocker, _unreachable
from grader.sandbox.isolation.syscalls import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_GET_NO_NEW_PRIVS,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    _check,
    _effective_caps,
    _libc,
    _prctl,
)

# The uid/gid the worker drops to when it runs as root. 65534 is "nobody" on every Linux
# distribution; it owns no files, so classic permissions keep it away from the grader's data,
# RLIMIT_NPROC applies to it, and it may not read /proc/<grader>/mem.
NOBODY = 65534

_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _can_drop_to_nobody() -> bool:
    """Root, and nobody exists in this user namespace."""
    return os.geteuid() == 0 and _maps_id("/proc/self/uid_map", NOBODY) and _maps_id("/proc/self/gid_map", NOBODY)


def _why_root_stays(readable: Iterable[str], workdir: str) -> str:
    """Why dropping to nobody would cost the worker a path it needs, or "" when it would not.

    A 0700 submission folder, or an interpreter under /root when no mount namespace could expose
    it: that would turn a correct submission into a load error. Then root stays, without any
    capability."""
    lost = _unreachable(readable, NOBODY, NOBODY)
    if _first_blocker(workdir, NOBODY, NOBODY) is not None:
        lost.append(workdir)
    return f"uid {NOBODY} could not read {', '.join(lost[:3])}" if lost else ""


def _chown_tree(root: str, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def _drop_capabilities() -> None:
    try:
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # kernels before 4.3 have no ambient set
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc().capset(ctypes.addressof(header), ctypes.addressof(data)), "capset")


def _layer_unprivileged(workdir: str, readable: Iterable[str], drop_to_nobody: bool, kept_because: str = "") -> Layer:
    notes: list[str] = []
    switched = False
    if drop_to_nobody:
        try:
            if os.path.isdir(workdir):
                _chown_tree(workdir, NOBODY, NOBODY)  # the only place the submission may write
            try:
                os.setgroups([])
            except PermissionError:
                pass  # setgroups denied in this user namespace: there are no extra groups
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)  # clears every capability (no KEEP_CAPS)
            switched = True
            notes.append(f"uid/gid {NOBODY} (nobody), no supplementary groups, workdir chowned to it")
        except OSError as exc:
            # Root without CAP_SETUID/CAP_CHOWN (a container): still drop what capabilities
            # there are, but uid 0 stays, so the layer does not count as active.
            notes.append(f"cannot switch to uid {NOBODY}: {exc}")
    else:
        notes.append(f"uid {os.getuid()} kept ({kept_because or f'not root, or {NOBODY} unmapped in this user namespace'})")
    try:
        _drop_capabilities()
    except OSError as exc:
        notes.append(f"capset: {exc.strerror}")
    caps = _effective_caps()
    notes.append(f"capabilities left: {caps:#x}" if caps else "no capabilities")
    unmapped = not _maps_id("/proc/self/uid_map", os.geteuid())
    if unmapped:
        # The overflow uid of an unmapped user namespace is still uid 0 to the host's permission
        # checks and process counts.
        notes.append("uid unmapped in this user namespace: the host still sees uid 0 (owner rights on root's files, no RLIMIT_NPROC)")
    active = not caps and not unmapped and (switched or os.geteuid() != 0)
    unreachable = _unreachable(_existing([*readable, workdir]), os.getuid(), os.getgid()) if switched else []
    if unreachable:
        notes.append(f"cannot reach (permission bits): {', '.join(unreachable[:5])}")
    return Layer("unprivileged-user", active, "; ".join(notes))


def set_parent_death_signal() -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _die_now() -> None:
    """The process that should supervise us is gone: stop without running any more code.

    SIGKILL first (what PR_SET_PDEATHSIG would have done); PID 1 of a PID namespace ignores a
    SIGKILL it sends itself, hence the _exit after it."""
    try:
        os.kill(os.getpid(), signal.SIGKILL)
    finally:
        os._exit(128 + signal.SIGKILL)


def _layer_parent_death(expected_ppid: int) -> Layer:
    try:
        set_parent_death_signal()
    except OSError as exc:
        return _failed("parent-death-signal", exc)
    # The parent may have died before prctl: then no signal will ever come. In a PID namespace
    # getppid() is 0 before and after, and run_in_pid_namespace covers that race with a pipe.
    if os.getppid() != expected_ppid:
        _die_now()
    return Layer("parent-death-signal", True, "SIGKILL when the parent (the grader or the namespace wrapper) dies")


def _layer_no_new_privs() -> Layer:
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        if _prctl(PR_GET_NO_NEW_PRIVS) != 1:
            return Layer("no-new-privs", False, "PR_GET_NO_NEW_PRIVS does not read back 1")
    except OSError as exc:
        return _failed("no-new-privs", exc)
    return Layer("no-new-privs", True, "execve can never grant privileges (setuid binaries, file capabilities)")

