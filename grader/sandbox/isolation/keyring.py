"""Kernel keyrings: no key crosses between the grader and a worker, or between two workers.

Keys are not files, so neither Landlock nor the mount namespace reaches them. A worker inherits
the grader's session keyring (a process may read every key it possesses), and every process of a
uid shares that uid's user keyring: as root, every worker runs as uid 65534, so a key one
submission left in its user keyring would be read by the next.

Two steps, after the drop to the unprivileged user (a keyring joined as root would stay root's)
and before the parent-death signal (entering a user namespace changes the credentials, and the
kernel clears that signal on such a change):

1. a new user namespace of the worker's own, its uid mapped to itself: since Linux 5.3 the user
   and user-session keyrings belong to the user namespace, so this worker's are empty and its
   own. The capabilities that namespace grants are dropped at once;
2. ``keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)``: a fresh anonymous session keyring, so the
   grader's session keyring is no longer possessed.

Where no user namespace can be made (the machine forbids them), step 2 still holds, but the user
keyring stays the one of the uid, shared with the grading user (unprivileged) or with every
other worker (root): the layer is reported off with that reason.
"""

from __future__ import annotations

import ctypes
import platform

from grader.sandbox.isolation.identity import _drop_capabilities
from grader.sandbox.isolation.model import Layer
from grader.sandbox.isolation.namespaces import _enter_user_namespace
from grader.sandbox.isolation.syscalls import _syscall

SYS_KEYCTL = 250  # x86_64; the generic table (aarch64, riscv64) uses 219
KEYCTL_JOIN_SESSION_KEYRING = 1


def _keyctl_number() -> int:
    return SYS_KEYCTL if platform.machine() in ("x86_64", "AMD64") else 219


def _join_session_keyring() -> int:
    return _syscall(_keyctl_number(), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None))


def _layer_keyring() -> Layer:
    notes: list[str] = []
    private_user_keyring = False
    try:
        notes.append(_enter_user_namespace())  # mapped or not, its keyrings are its own
        private_user_keyring = True
    except OSError as exc:
        notes.append(f"no user namespace of its own ({exc.strerror or exc}): the user keyring of the uid stays shared")
    try:
        _drop_capabilities()  # what the new user namespace granted
    except OSError as exc:
        return Layer("keyring", False, f"capabilities of the new user namespace not dropped: {exc.strerror or exc}")
    try:
        serial = _join_session_keyring()
    except OSError as exc:
        return Layer("keyring", False, f"no fresh session keyring ({exc.strerror or exc}); " + "; ".join(notes))
    detail = f"fresh anonymous session keyring {serial}"
    if private_user_keyring:
        return Layer("keyring", True, detail + "; user keyring private to a user namespace of its own")
    return Layer("keyring", False, detail + "; " + "; ".join(notes))
