"""The user, network and IPC namespaces.

A user namespace is only the means: it gives an unprivileged process CAP_SYS_ADMIN over the
namespaces it creates next (network, IPC, mount, PID), so it comes first and needs a single
thread. Root in the initial user namespace creates those directly and makes none.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from grader.sandbox.isolation.model import Layer, _failed
from grader.sandbox.isolation.syscalls import CAP_SYS_ADMIN, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWUSER, _has_cap, _unshare


def _maps_id(map_file: str, wanted: int) -> bool:
    """Whether ``wanted`` is mapped in this user namespace (uid_map / gid_map)."""
    try:
        with open(map_file) as fh:
            for line in fh:
                inside, _outside, count = (int(x) for x in line.split())
                if inside <= wanted < inside + count:
                    return True
    except (OSError, ValueError):
        return False
    return False


def _in_initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as fh:
            return fh.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def _write_proc(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_user_namespace(extra_flags: int = 0, *, strict: bool = False) -> str:
    """unshare(CLONE_NEWUSER | extra_flags) and map our own uid/gid to themselves.

    The same uid inside as outside (not 0): files the process creates keep the right owner, and
    the capabilities the new namespace grants are dropped later by the unprivileged-user layer.
    ``strict`` raises when the maps cannot be written (for a caller that gives up then).
    """
    uid, gid = os.geteuid(), os.getegid()
    _unshare(CLONE_NEWUSER | extra_flags)
    # From here on the namespaces exist whatever happens to the maps: never raise, the caller
    # must go on as if the unshare succeeded (a new PID namespace is already set for children).
    try:
        try:
            # setgroups must be denied before an unprivileged process may write gid_map.
            _write_proc("/proc/self/setgroups", "deny")
        except FileNotFoundError:
            pass  # kernels before 3.19
        _write_proc("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write_proc("/proc/self/gid_map", f"{gid} {gid} 1\n")
    except OSError as exc:
        # Typically uid 0 without CAP_SETFCAP (root in a container), which may not map the
        # parent's root. Unmapped still works: the process keeps its capabilities inside the new
        # namespace and shows up as the overflow uid 65534.
        if strict:
            raise
        return f"user namespace with uid {uid} left unmapped ({exc.strerror})"
    return f"user namespace with uid {uid} and gid {gid} mapped to themselves"


def _layer_user_namespace() -> Layer:
    """Gives the process CAP_SYS_ADMIN over new namespaces when it is not privileged."""
    if _has_cap(CAP_SYS_ADMIN):
        return Layer("user-namespace", True, "already inside a user namespace (made by the fork server or by run_in_pid_namespace)")
    try:
        return Layer("user-namespace", True, _enter_user_namespace())
    except OSError as exc:
        return _failed("user-namespace", exc)


def _user_namespace_if_needed(want: Callable[[str], bool]) -> list[Layer]:
    """The user-namespace layer, when a selected layer needs it. Only reported when it matters:
    a privileged process in the initial user namespace creates the other namespaces directly
    and needs none. Not a guarantee of its own but the means to the ones selected: never "not
    selected"."""
    needs_namespaces = any(want(n) for n in ("network-namespace", "ipc-namespace", "mount-namespace"))
    if not needs_namespaces or (_has_cap(CAP_SYS_ADMIN) and _in_initial_user_namespace()):
        return []
    try:
        return [_layer_user_namespace()]
    except Exception as exc:  # noqa: BLE001 - one surprising error costs one layer, never the worker
        return [_failed("user-namespace", exc)]


def _layer_network() -> Layer:
    try:
        _unshare(CLONE_NEWNET)
    except OSError as exc:
        return _failed("network-namespace", exc)
    # A new network namespace has only a loopback interface, and it is down: no route anywhere,
    # not even to 127.0.0.1, and the abstract unix socket namespace is a new, empty one.
    return Layer("network-namespace", True, "new network namespace with loopback down: no TCP/UDP/ICMP anywhere, no abstract sockets of the host")


def _layer_ipc() -> Layer:
    try:
        _unshare(CLONE_NEWIPC)
    except OSError as exc:
        return _failed("ipc-namespace", exc)
    return Layer("ipc-namespace", True, "new IPC namespace: no SysV shared memory, semaphores or message queues of the host")
