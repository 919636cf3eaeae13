"""Isolation layers the worker applies to itself before it loads an untrusted submission.

Everything here is best effort and independently fallible: each layer is tried, and one that the
kernel, the container or the privileges of this run refuse is reported as inactive (with the
reason) instead of raising. The grader shows the list (``grade --sandbox-info``) so that a run
with weaker isolation is visible rather than silent. Only the standard library is used (ctypes
for the few syscalls Python 3.11 does not wrap: unshare, mount, prctl, capset, Landlock).

How the worker uses it::

    code = run_in_pid_namespace(lambda: worker_main(...))   # worker_main calls apply_isolation()
    relay_exit(code)   # a child killed by SIGKILL/SIGXCPU shows up to the grader as such

``run_in_pid_namespace`` makes the worker PID 1 of a fresh PID namespace, so that every process
the submission starts (setsid and double-fork included) dies with it. A SIGTERM to the process
that called it (the grader's stop after a timeout) kills the worker and, in the subreaper
fallback, sweeps what it left, before the grader's SIGKILL of the whole group. The fork server
does without that supervising process where it can: ``NamespaceForks`` forks each worker
straight into a namespace of its own (as root directly, otherwise from a user namespace the
server makes for itself), and the worker runs through ``run_as_namespace_init`` (a SIGKILL to it
then ends the whole namespace). Inside, after numpy is imported and the request is read,
``apply_isolation(policy)`` applies the other layers.

Order inside apply_isolation, and why it is that order:

 0. check that the process is single-threaded: unshare(CLONE_NEWUSER) refuses threaded callers,
    and namespaces, no_new_privs and Landlock (before ABI 8's TSYNC) apply to the calling thread
    only. OpenBLAS starts a thread per core at import unless OPENBLAS_NUM_THREADS=1.
 1. session: no controlling terminal, and a process group the grader kills as a whole: the group
    of the process the grader started when that process forked us (so one killpg reaches us and
    our children even without a PID namespace), else a new session (setsid).
 2. user namespace, only when the process lacks CAP_SYS_ADMIN (not root): it is what lets an
    unprivileged process create the network and mount namespaces. Must come before them and
    needs a single thread.
 3. network and IPC namespaces: need CAP_SYS_ADMIN (real, or from step 2).
 4. mount namespace: make / private first (otherwise the mounts would propagate to the host and
    hide the references from the grader itself), make the readable paths reachable for the
    unprivileged user (see below), mount an empty read-only tmpfs over every hidden path, and
    mount a fresh /proc when PID 1 of a new PID namespace. Must come before Landlock: a
    Landlock-restricted process can no longer mount.
 5. Landlock rulesets are built (paths opened with O_PATH) while still privileged and after the
    mounts, so the rules point at the final mount tree, but only enforced in step 10.
 6. rlimits: after the setup work above that allocates memory and file descriptors, before the
    uid change (root may set any hard limit; afterwards it could only lower them).
 7. the workdir is chowned to the unprivileged user (needs CAP_CHOWN, so before step 8).
 8. unprivileged user: setgroups([]), setgid/setuid(65534) when root, else drop every
    capability. After everything that needs privileges. Root stays root (without capabilities)
    when 65534 could not read a readable path even after step 4: a correct submission must never
    become a load error because of the sandbox.
 9. parent-death signal and no_new_privs: PR_SET_PDEATHSIG is cleared by the kernel on every
    change of euid/egid, so it is set after step 8. no_new_privs is required for Landlock
    (restrict_self without CAP_SYS_ADMIN) and blocks regaining privileges through setuid
    binaries or file capabilities.
10. Landlock restrict_self (filesystem, TCP, signal/abstract-socket scoping): last, so that none
    of the steps above is itself restricted.

Paths and the unprivileged user: after setuid(65534) the classic permission bits apply again.
A readable path below a folder only root may enter (here: the Python of pyenv lives under
/root, mode 0700) would become unreachable, and every later import of a stdlib module that was
not imported yet would fail. In the private mount namespace such a blocking folder is replaced
by a read-only tmpfs holding only bind mounts of the readable paths below it. Without a mount
namespace, the layer still drops privileges and lists the unreachable paths in its detail.

Pitfalls for the caller:

* Threads. Set OPENBLAS_NUM_THREADS=1 (and OMP_/MKL_) before numpy is imported; the
  "single-threaded" layer reports the thread count. PR_SET_PDEATHSIG fires when the *thread*
  that forked the worker exits, so the grader must not start workers from short-lived threads.
* Hidden paths inside a readable folder leave the folders above them traverse-only under
  Landlock (Landlock cannot grant "list this folder but not that subfolder"). Python's import
  system lists a sys.path folder once and caches it, so the worker must import numpy (which
  fills the site-packages cache) and everything of the grader it needs before isolation.
* After the drop to uid 65534, the submission's folder must be readable by others (a
  tempfile.mkdtemp folder is 0700) unless the mount namespace could make it reachable; the
  detail of "unprivileged-user" lists what stays unreachable. Set TMPDIR to the workdir: /tmp
  is not writable.
* RLIMIT_NPROC counts every process of the uid (65534) on the machine, so parallel workers share
  it; RLIMIT_CPU is per process (each child of the submission has its own); RLIMIT_AS counts
  address space (about 100 MiB for Python + numpy with one OpenBLAS thread, more per thread).

What is not covered: seccomp (the submission may still call unshare(CLONE_NEWUSER), io_uring,
...), cgroups (memory is bounded by RLIMIT_AS, not by a cgroup). Landlock (ABI <= 7) controls
neither UDP nor connecting to a pathname unix socket: the network namespace removes UDP, and
after the drop to uid 65534 only world-writable sockets stay connectable.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import math
import os
import platform
import resource
import select
import shutil
import signal
import site
import stat
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Callable, Collection, Iterable
from typing import NoReturn
from dataclasses import dataclass


__all__ = [
    "GUARANTEES",
    "LAYER_NAMES",
    "Layer",
    "Policy",
    "apply_isolation",
    "default_readable_paths",
    "missing_guarantees",
    "why_missing",
    "probe_layers",
    "relay_exit",
    "run_in_pid_namespace",
]


@dataclass(frozen=True)
class Layer:
    """One isolation layer of a worker, and whether it is in force."""

    name: str  # "rlimits", "no-new-privs", "landlock-fs", ...
    active: bool
    detail: str  # why inactive, or what it does


# The layers apply_isolation(only=...) can select; the rest (single-threaded, user-namespace,
# pid-namespace) are preconditions or means, reported but not selected.
LAYER_NAMES: tuple[str, ...] = (
    "session",
    "network-namespace",
    "ipc-namespace",
    "mount-namespace",
    "rlimits",
    "unprivileged-user",
    "parent-death-signal",
    "no-new-privs",
    "landlock-fs",
    "landlock-net",
    "landlock-signal",
)


# The three guarantees the strict mode insists on, each with the one layer that gives it in full.
# The alternatives are weaker: Landlock's TCP rules leave UDP open; a mount namespace hides the
# references but lets the submission write to /tmp; the subreaper fallback loses a setsid escaper
# when its supervisor is killed.
GUARANTEES: dict[str, str] = {
    "network": "network-namespace",
    "filesystem": "landlock-fs",
    "process": "pid-namespace",
}


def missing_guarantees(layers: Iterable[Layer]) -> list[str]:
    """The guarantees of GUARANTEES whose layer is not active in ``layers``."""
    active = {layer.name for layer in layers if layer.active}
    return [guarantee for guarantee, name in GUARANTEES.items() if name not in active]


def why_missing(layers: Iterable[Layer]) -> str:
    """One line: each missing guarantee with its layer and the reason that layer gave."""
    by_name = {layer.name: layer for layer in layers}
    reasons = []
    for guarantee in missing_guarantees(by_name.values()):
        name = GUARANTEES[guarantee]
        reasons.append(f"{guarantee} ({name}: {by_name[name].detail if name in by_name else 'not reported'})")
    return "; ".join(reasons)


@dataclass(frozen=True)
class Policy:
    """What one worker may read and write, and its resource limits."""

    workdir: str  # the worker's private temp folder: the only writable place
    readable: tuple[str, ...]  # folders/files the worker may read and execute
    hidden: tuple[str, ...]  # never readable, even below a readable folder
    cpu_seconds: int  # CPU budget of the submission, counted from apply_isolation()
    memory_bytes: int  # RLIMIT_AS: address space, not resident memory
    file_bytes: int  # RLIMIT_FSIZE: largest file the process may write
    open_files: int  # RLIMIT_NOFILE
    processes: int  # RLIMIT_NPROC: only enforced for a non-root uid


# --------------------------------------------------------------------------------------------
# Raw system interfaces
# --------------------------------------------------------------------------------------------

# The uid/gid the worker drops to when it runs as root. 65534 is "nobody" on every Linux
# distribution; it owns no files, so classic permissions keep it away from the grader's data,
# RLIMIT_NPROC applies to it, and it may not read /proc/<grader>/mem.
NOBODY = 65534

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
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# Landlock syscalls have the same number on every architecture that uses the generic table
# (x86_64, aarch64, riscv64, ...): they were added after the numbers were unified. Alpha is
# the one exception and is not supported here.
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RESTRICT_SELF_TSYNC = 1 << 3  # ABI 8: enforce on every thread of the process

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

# Access rights each ABI version knows; the kernel rejects unknown bits, so the handled set is
# masked by version, as the Landlock documentation recommends ("best effort").
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FS_ALL_KNOWN = (1 << 16) - 1  # ABI 5 and later
# Rights that make sense on a file (not a directory); anything else on a file rule is EINVAL.
_FS_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
_FS_READ_EXEC = FS_READ_FILE | FS_READ_DIR | FS_EXECUTE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),  # ABI 4
        ("scoped", ctypes.c_uint64),  # ABI 6
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel struct is __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


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


def _landlock_abi() -> int:
    """The Landlock ABI version, or 0 when Landlock is missing or disabled."""
    if platform.machine().startswith("alpha"):
        return 0
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0), ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:
        return 0  # ENOSYS: not built in; EOPNOTSUPP: disabled at boot


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


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


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


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _beneath(path: str, root: str) -> bool:
    """path == root or path is inside root (both canonical)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _existing(paths: Iterable[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        real = _real(path)
        if os.path.exists(real) and real not in found:
            found.append(real)
    return found


def _outermost(paths: Iterable[str]) -> list[str]:
    """Drop every path that lies inside another one of the list."""
    ordered = sorted(set(paths), key=lambda p: (p.count("/"), p))
    kept: list[str] = []
    for path in ordered:
        if not any(_beneath(path, k) for k in kept):
            kept.append(path)
    return kept


def default_readable_paths(*extra: str) -> tuple[str, ...]:
    """What a Python worker with numpy needs to read after isolation, plus ``extra``.

    The interpreter's prefixes (stdlib, lib-dynload, site-packages: needed for every module
    imported after isolation, and for tracebacks) and the system library folders (extension
    modules dlopen libz, libffi, ... on first import). Never the current folder or sys.path[0],
    which may be the grader's source tree with its references. Add the submission's folder.
    """
    return tuple(_outermost([*_interpreter_paths(), *_existing(extra)]))


@functools.lru_cache(maxsize=1)
def _interpreter_paths() -> tuple[str, ...]:
    """The fixed part of default_readable_paths, resolved once per process (a batch asks for it
    once per submission)."""
    candidates = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    paths = sysconfig.get_paths()
    candidates += [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    try:
        candidates += site.getsitepackages()
    except AttributeError:
        pass  # old virtualenv's site module
    candidates += ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache"]
    return tuple(_existing(candidates))


def _carve(root: str, hidden: list[str]) -> tuple[list[str], list[str]]:
    """Landlock is an allow-list and a rule on a folder covers everything below it. To keep a
    hidden path unreadable below a readable root, grant every entry of the root individually
    except the branch leading to the hidden path, and recurse into that branch.

    Returns (paths to grant, folders left traverse-only). A traverse-only folder can still be
    walked through (path lookup is not a Landlock right) but not listed: Python's import system
    lists a sys.path folder once and caches the listing, so modules in such a folder import only
    if that cache was filled before isolation (it is for site-packages once numpy is imported).
    Symlinks are skipped rather than granted: Landlock checks the resolved target anyway, so
    following one here could only widen the grant to somewhere outside the root.
    """
    inside = [h for h in hidden if _beneath(h, root)]
    if not inside:
        return [root], []
    if root in inside:
        return [], []
    grants: list[str] = []
    blocked = [root]
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return [], blocked
    for entry in entries:
        child = os.path.join(root, entry.name)
        try:
            if entry.is_symlink():
                continue
        except OSError:
            continue
        if child in inside:
            continue
        if any(_beneath(h, child) for h in inside):
            sub_grants, sub_blocked = _carve(child, inside)
            grants += sub_grants
            blocked += sub_blocked
        else:
            grants.append(child)
    return grants, blocked


def _may(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    """Classic permission check for a uid/gid without supplementary groups (ACLs ignored)."""
    if st.st_uid == uid:
        mode = st.st_mode >> 6 & 7
    elif st.st_gid == gid:
        mode = st.st_mode >> 3 & 7
    else:
        mode = st.st_mode & 7
    return mode & bits == bits


def _first_blocker(path: str, uid: int, gid: int) -> str | None:
    """The outermost folder above ``path`` that uid/gid may not enter, or None."""
    parts = path.strip("/").split("/")
    current = "/"
    for part in parts[:-1]:
        try:
            if not _may(os.stat(current), uid, gid, 1):
                return current
        except OSError:
            return current
        current = os.path.join(current, part)
    try:
        if not _may(os.stat(current), uid, gid, 1):
            return current
    except OSError:
        return current
    return None


def _unreachable(paths: Iterable[str], uid: int, gid: int) -> list[str]:
    bad: list[str] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        wanted = 5 if stat.S_ISDIR(st.st_mode) else 4
        if _first_blocker(path, uid, gid) is not None or not _may(st, uid, gid, wanted):
            bad.append(path)
    return bad


def _make_reachable(paths: list[str], uid: int, gid: int) -> list[str]:
    """Inside a private mount namespace, let uid/gid reach ``paths`` whose parent folders it may
    not enter: the outermost blocking folder is covered by a read-only tmpfs (mode 0755) that
    holds only the chain of folders leading to each path, with the path bind-mounted from the
    original. The host's view is untouched. Returns notes for the layer's detail."""
    notes: list[str] = []
    pending = _outermost(paths)
    for _round in range(len(pending) + 1):  # each round fixes at least one blocker
        groups: dict[str, list[str]] = {}
        for path in pending:
            blocker = _first_blocker(path, uid, gid)
            if blocker is not None and blocker != path:
                groups.setdefault(blocker, []).append(path)
        if not groups:
            break
        blocker = min(groups, key=lambda b: (b.count("/"), b))
        targets = groups[blocker]
        # O_PATH handles taken before the folder is covered; bind mounts are made from them.
        handles = {t: os.open(t, os.O_PATH | os.O_CLOEXEC) for t in targets}
        try:
            _mount("tmpfs", blocker, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
            for target, fd in handles.items():
                parent = os.path.dirname(target)
                os.makedirs(parent, mode=0o755, exist_ok=True)
                # makedirs is subject to the umask; the skeleton must be enterable by uid.
                walk = parent
                while _beneath(walk, blocker):
                    os.chmod(walk, 0o755)
                    if walk == blocker:
                        break
                    walk = os.path.dirname(walk)
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.makedirs(target, mode=0o755, exist_ok=True)
                else:
                    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
                _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
            try:
                _mount(None, blocker, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            except OSError:
                pass  # the skeleton stays writable by root only: uid cannot write it anyway
        finally:
            for fd in handles.values():
                os.close(fd)
        notes.append(f"{blocker} (not enterable by uid {uid}) replaced by a tmpfs exposing {len(targets)} path(s)")
    return notes


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------


def _failed(name: str, exc: BaseException) -> Layer:
    return Layer(name, False, f"{type(exc).__name__}: {exc}")


def _layer_threads() -> Layer:
    count = _thread_count()
    if count == 1:
        return Layer("single-threaded", True, "one thread: namespaces, no_new_privs and Landlock cover the whole process")
    return Layer(
        "single-threaded",
        False,
        f"{count} threads: user namespaces cannot be created, and namespaces, no_new_privs and Landlock "
        "(before ABI 8) apply to the calling thread only; set OPENBLAS_NUM_THREADS=1 (and OMP/MKL) before importing numpy",
    )


def _tty_nr() -> int:
    """The controlling terminal's device number from /proc/self/stat, 0 when there is none."""
    try:
        with open("/proc/self/stat") as fh:
            data = fh.read()
        return int(data[data.rfind(")") + 2 :].split()[4])
    except (OSError, ValueError, IndexError):
        return -1


def _layer_session() -> Layer:
    # A worker forked by the process the grader started in a session of its own stays in that
    # process group: the grader's one killpg then also reaches it and every child that did not
    # call setsid, even where no PID namespace can be made. It has no terminal to lose.
    if os.getpid() != 1 and _tty_nr() == 0 and os.getpgrp() == os.getppid():
        return Layer("session", True, f"process group {os.getpgrp()} of the process the grader started, no controlling terminal: one killpg ends it")
    try:
        os.setsid()
        return Layer("session", True, f"new session and process group {os.getsid(0)}: no controlling terminal, one killpg ends it")
    except OSError as exc:
        if os.getsid(0) == os.getpid():
            return Layer("session", True, f"already leader of session {os.getpid()}")
        return _failed("session", exc)


def _layer_user_namespace() -> Layer:
    """Gives the process CAP_SYS_ADMIN over new namespaces when it is not privileged."""
    if _has_cap(CAP_SYS_ADMIN):
        return Layer("user-namespace", True, "already inside a user namespace (made by the fork server or by run_in_pid_namespace)")
    try:
        return Layer("user-namespace", True, _enter_user_namespace())
    except OSError as exc:
        return _failed("user-namespace", exc)


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


def _layer_mount(policy: Policy, hidden: list[str], reach_for: tuple[int, int] | None) -> Layer:
    try:
        _unshare(CLONE_NEWNS)
    except OSError as exc:
        return _failed("mount-namespace", exc)
    try:
        # Without this, mounts below would propagate to the host when / is a shared mount.
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        return Layer("mount-namespace", False, f"new mount namespace but / could not be made private ({exc}); nothing mounted")
    notes: list[str] = []
    if reach_for is not None:
        wanted = _existing([*policy.readable, policy.workdir])
        try:
            notes += _make_reachable(_unreachable(wanted, *reach_for), *reach_for)
        except OSError as exc:
            notes.append(f"making readable paths reachable failed: {exc}")
    covered = 0
    for path in hidden:
        try:
            if os.path.isdir(path):
                _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k,nr_inodes=2")
            else:
                # A file cannot be covered by a tmpfs; /dev/null reads as empty.
                _mount("/dev/null", path, None, MS_BIND)
                try:
                    flags = os.statvfs(path).f_flag
                    keep = flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
                    keep |= MS_RELATIME if flags & 4096 else 0  # ST_RELATIME differs from MS_RELATIME
                    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
                except OSError:
                    pass  # still hidden; only writes would reach /dev/null
            covered += 1
        except OSError as exc:
            notes.append(f"cannot cover {path}: {exc.strerror}")
    if os.getpid() == 1:
        # PID 1 of a new PID namespace: a /proc of that namespace shows only its processes.
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            notes.append("fresh /proc of the PID namespace")
        except OSError as exc:
            notes.append(f"/proc not remounted: {exc.strerror}")
    notes.insert(0, f"private mount namespace; {covered}/{len(hidden)} hidden path(s) covered by an empty read-only mount")
    return Layer("mount-namespace", covered == len(hidden), "; ".join(notes))


@dataclass
class _Rulesets:
    """The Landlock rulesets built for a worker, before they are enforced."""

    abi: int
    fs_fd: int | None = None
    net_fd: int | None = None
    scope_fd: int | None = None
    fs_detail: str = ""
    fs_error: str = ""
    net_detail: str = ""
    scope_detail: str = ""

    def close(self) -> None:
        for fd in (self.fs_fd, self.net_fd, self.scope_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fs_fd = self.net_fd = self.scope_fd = None


def _create_ruleset(fs: int = 0, net: int = 0, scoped: int = 0) -> int:
    attr = _RulesetAttr(fs, net, scoped)
    # Pass only the fields in use: kernels older than the field reject a larger struct.
    size = 24 if scoped else 16 if net else 8
    return _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_void_p(ctypes.addressof(attr)), ctypes.c_size_t(size), ctypes.c_uint32(0))


def _add_path_rule(ruleset_fd: int, path: str, access: int, handled: int) -> bool:
    """Allow ``access`` beneath ``path``; False when the path is gone or the right set is empty."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FS_FILE_RIGHTS
        access &= handled
        if not access:
            return False
        attr = _PathBeneathAttr(access, fd)
        _syscall(
            SYS_LANDLOCK_ADD_RULE,
            ctypes.c_int(ruleset_fd),
            ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
            ctypes.c_void_p(ctypes.addressof(attr)),
            ctypes.c_uint32(0),
        )
        return True
    finally:
        os.close(fd)


def _build_fs_ruleset(rs: _Rulesets, policy: Policy, hidden: list[str]) -> None:
    handled = _FS_BY_ABI.get(rs.abi, _FS_ALL_KNOWN)
    fd = _create_ruleset(fs=handled)
    try:
        readable = _existing(policy.readable)
        # A readable root inside a hidden path would expose it: hidden wins.
        dropped = [r for r in readable if any(_beneath(r, h) for h in hidden)]
        readable = [r for r in readable if r not in dropped]
        granted = 0
        blocked: list[str] = []
        for root in _outermost(readable):
            grants, traverse_only = _carve(root, hidden)
            blocked += traverse_only
            for path in grants:
                granted += _add_path_rule(fd, path, _FS_READ_EXEC, handled)
        workdir = _real(policy.workdir)
        work_grants, work_blocked = _carve(workdir, hidden)
        blocked += work_blocked
        for path in work_grants:
            _add_path_rule(fd, path, handled, handled)
        # What numpy and Python still open at run time. /proc/self resolves now, to this
        # process: a child the submission forks cannot read its own /proc entry, nor anyone's.
        _add_path_rule(fd, "/dev/null", FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV, handled)
        for device in ("/dev/zero", "/dev/urandom", "/dev/random"):
            _add_path_rule(fd, device, FS_READ_FILE | FS_IOCTL_DEV, handled)
        _add_path_rule(fd, "/proc/self", FS_READ_FILE | FS_READ_DIR, handled)
    except BaseException:
        os.close(fd)
        raise
    rs.fs_fd = fd
    detail = f"ABI {rs.abi}: read/execute beneath {granted} path(s), full access beneath {workdir} only, /dev/null, /dev/(u)random, /proc/self"
    if blocked:
        detail += f"; {len(hidden)} hidden path(s) carved out, {len(blocked)} folder(s) above them traverse-only (not listable): {', '.join(blocked[:4])}"
        detail += "..." if len(blocked) > 4 else ""
    if dropped:
        detail += f"; readable paths inside hidden ones dropped: {', '.join(dropped)}"
    rs.fs_detail = detail


def _build_rulesets(policy: Policy, hidden: list[str], want: Callable[[str], bool]) -> _Rulesets:
    rs = _Rulesets(abi=_landlock_abi())
    if rs.abi < 1:
        return rs
    if want("landlock-fs"):
        try:
            _build_fs_ruleset(rs, policy, hidden)
        except OSError as exc:
            rs.fs_error = f"{type(exc).__name__}: {exc}"
    if want("landlock-net") and rs.abi >= 4:
        try:
            # Handled with no rule: every TCP bind and connect is denied, on any address.
            rs.net_fd = _create_ruleset(net=NET_BIND_TCP | NET_CONNECT_TCP)
            rs.net_detail = f"ABI {rs.abi}: TCP bind and connect denied (UDP is not covered by Landlock)"
        except OSError as exc:
            rs.net_detail = f"{type(exc).__name__}: {exc}"
    if want("landlock-signal") and rs.abi >= 6:
        try:
            rs.scope_fd = _create_ruleset(scoped=SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET)
            rs.scope_detail = f"ABI {rs.abi}: no signal to, and no abstract unix socket of, any process outside the sandbox (the grader)"
        except OSError as exc:
            rs.scope_detail = f"{type(exc).__name__}: {exc}"
    return rs


def _restrict(rs: _Rulesets, threads: int) -> list[Layer]:
    layers: list[Layer] = []
    # TSYNC (ABI 8) applies the domain to every thread; without it only this thread is bound.
    flags = LANDLOCK_RESTRICT_SELF_TSYNC if rs.abi >= 8 and threads > 1 else 0
    thread_note = "" if threads == 1 or flags else f" (calling thread only: {threads} threads)"
    for name, fd, detail, min_abi in (
        ("landlock-fs", rs.fs_fd, rs.fs_detail or rs.fs_error, 1),
        ("landlock-net", rs.net_fd, rs.net_detail, 4),
        ("landlock-signal", rs.scope_fd, rs.scope_detail, 6),
    ):
        if rs.abi < 1:
            layers.append(Layer(name, False, "Landlock is not available (kernel without it, or disabled at boot)"))
        elif rs.abi < min_abi:
            layers.append(Layer(name, False, f"needs Landlock ABI {min_abi}, kernel has {rs.abi}"))
        elif fd is None:
            layers.append(Layer(name, False, detail or "ruleset not built"))
        else:
            try:
                _syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(flags))
                layers.append(Layer(name, True, detail + thread_note))
            except OSError as exc:
                layers.append(_failed(name, exc))
    rs.close()
    return layers


def _chown_tree(root: str, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def _vm_size() -> int:
    value = _status_field("VmSize")
    return int(value.split()[0]) * 1024 if value else 0


def _highest_fd() -> int:
    try:
        return max(int(n) for n in os.listdir("/proc/self/fd"))
    except (OSError, ValueError):
        return 0


def _layer_rlimits(policy: Policy, will_be_root: bool) -> Layer:
    # RLIMIT_CPU counts the CPU the process already used (interpreter start, numpy import), so
    # the budget is added to it; soft = hard makes the kernel send SIGKILL, which unlike SIGXCPU
    # cannot be caught. Every child gets a fresh CPU count of its own (RLIMIT_NPROC bounds them).
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(math.ceil(usage.ru_utime + usage.ru_stime)) + max(1, policy.cpu_seconds)
    wanted = [
        ("CPU", resource.RLIMIT_CPU, cpu),
        ("AS", resource.RLIMIT_AS, policy.memory_bytes),
        ("FSIZE", resource.RLIMIT_FSIZE, policy.file_bytes),
        ("NOFILE", resource.RLIMIT_NOFILE, policy.open_files),
        ("NPROC", resource.RLIMIT_NPROC, policy.processes),
        ("CORE", resource.RLIMIT_CORE, 0),  # no core file of a process holding the inputs
    ]
    set_ok: list[str] = []
    problems: list[str] = []  # a limit that could not be set: the layer is inactive
    warnings: list[str] = []  # set, but probably not what the caller meant
    for label, which, value in wanted:
        try:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and value > hard and os.geteuid() != 0:
                value = hard  # an unprivileged process cannot raise its hard limit
            resource.setrlimit(which, (value, value))
            set_ok.append(f"{label}={value}")
        except (OSError, ValueError) as exc:
            problems.append(f"{label}: {exc}")
    notes = [", ".join(set_ok)]
    vm = _vm_size()
    if vm and policy.memory_bytes < vm:
        warnings.append(f"AS limit below the {vm // 2**20} MiB already mapped: every allocation will fail")
    if _highest_fd() >= policy.open_files:
        warnings.append(f"an inherited fd is above NOFILE={policy.open_files} (still usable, new fds are not)")
    if will_be_root:
        notes.append("NPROC is not enforced while uid 0 / CAP_SYS_RESOURCE")
    else:
        notes.append("NPROC counts every process of this uid on the machine, parallel workers included")
    return Layer("rlimits", not problems, "; ".join(notes + warnings + problems))


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


# How the current process was started, for the pid-namespace layer's detail. Set by
# run_in_pid_namespace in the child it forks (a fork inherits module state).
_PID_NS_STATE: str | None = None


def _layer_pid_namespace() -> Layer:
    if os.getpid() == 1:
        return Layer("pid-namespace", True, _PID_NS_STATE or "PID 1 of a PID namespace: every process left in it dies with this one")
    return Layer("pid-namespace", False, _PID_NS_STATE or "not PID 1 of a PID namespace: run the worker through run_in_pid_namespace()")


def apply_isolation(policy: Policy, *, only: Collection[str] | None = None) -> list[Layer]:
    """Called inside the (single-threaded!) worker process, after it imported numpy and read its
    request, before it imports the submission. Applies every layer that works here, never raises
    for a layer that is unavailable, returns what is active.

    ``only`` restricts the run to the named layers (for tests and diagnosis); the others are
    reported inactive as "not selected". Landlock sets no_new_privs itself when it needs it.
    """

    def want(name: str) -> bool:
        return only is None or name in only

    def run(name: str, layer: Callable[[], Layer]) -> Layer:
        # Each layer handles the failures it expects; this catches the ones it does not, so that
        # one surprising error costs one layer and never the worker.
        if not want(name):
            return Layer(name, False, "not selected")
        try:
            return layer()
        except Exception as exc:  # noqa: BLE001
            return _failed(name, exc)

    ppid = os.getppid()
    layers = [_layer_threads()]
    threads = _thread_count()
    hidden = _outermost(_existing(policy.hidden))  # a path inside a hidden one is hidden with it
    readable = _existing(policy.readable)
    workdir = _real(policy.workdir)

    layers.append(run("session", _layer_session))

    # Only reported when it matters: a privileged process in the initial user namespace creates
    # the other namespaces directly and needs none.
    needs_namespaces = any(want(n) for n in ("network-namespace", "ipc-namespace", "mount-namespace"))
    if needs_namespaces and not (_has_cap(CAP_SYS_ADMIN) and _in_initial_user_namespace()):
        # Not a guarantee of its own but the means to the ones selected: never "not selected".
        try:
            layers.append(_layer_user_namespace())
        except Exception as exc:  # noqa: BLE001 - see run()
            layers.append(_failed("user-namespace", exc))
    layers.append(run("network-namespace", _layer_network))
    layers.append(run("ipc-namespace", _layer_ipc))

    # Root drops to nobody, if nobody exists in this user namespace.
    drop = want("unprivileged-user") and os.geteuid() == 0 and _maps_id("/proc/self/uid_map", NOBODY) and _maps_id("/proc/self/gid_map", NOBODY)
    layers.append(run("mount-namespace", lambda: _layer_mount(policy, hidden, (NOBODY, NOBODY) if drop else None)))
    kept_because = ""
    if drop:
        # Dropping to nobody must not cost the worker a path it needs (a 0700 submission folder,
        # or an interpreter under /root when no mount namespace could expose it): that would turn
        # a correct submission into a load error. Then root stays, without any capability.
        lost = _unreachable(readable, NOBODY, NOBODY)
        if _first_blocker(workdir, NOBODY, NOBODY) is not None:
            lost.append(workdir)
        if lost:
            drop = False
            kept_because = f"uid {NOBODY} could not read {', '.join(lost[:3])}"

    try:
        rulesets = _build_rulesets(policy, hidden, want)
    except Exception as exc:  # noqa: BLE001 - see run()
        rulesets = _Rulesets(abi=_landlock_abi(), fs_error=f"{type(exc).__name__}: {exc}")
    try:
        still_root = not drop and os.geteuid() == 0
        layers.append(run("rlimits", lambda: _layer_rlimits(policy, will_be_root=still_root)))
        layers.append(run("unprivileged-user", lambda: _layer_unprivileged(workdir, readable, drop, kept_because)))
        layers.append(run("parent-death-signal", lambda: _layer_parent_death(ppid)))
        layers.append(run("no-new-privs", _layer_no_new_privs))
        if any(fd is not None for fd in (rulesets.fs_fd, rulesets.net_fd, rulesets.scope_fd)) and not _has_cap(CAP_SYS_ADMIN):
            try:
                _prctl(PR_SET_NO_NEW_PRIVS, 1)  # restrict_self requires it without CAP_SYS_ADMIN
            except OSError:
                pass
        landlock = _restrict(rulesets, threads)
    finally:
        rulesets.close()
    for layer in landlock:
        layers.append(layer if want(layer.name) else Layer(layer.name, False, "not selected"))
    layers.append(_layer_pid_namespace())
    return layers


# --------------------------------------------------------------------------------------------
# PID namespace
# --------------------------------------------------------------------------------------------


def _exit_code(status: int) -> int:
    """Shell convention: the exit code, or 128 + signal number when killed by a signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def relay_exit(code: int) -> NoReturn:
    """End this process the way the child whose ``code`` run_in_pid_namespace returned ended:
    128 + N is re-raised as signal N, so the grader's waitpid sees "killed by SIGKILL/SIGXCPU"
    exactly as without the wrapper; any other code is an ordinary exit. (A child that exits on
    its own with a code above 128 looks the same: the worker's own codes stay below.)"""
    signum = code - 128
    if 0 < signum < signal.NSIG and signum not in (signal.SIGSTOP, signal.SIGCONT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        for prepare in (
            lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),  # SIGSEGV/SIGABRT: no core of ours
            lambda: signal.signal(signum, signal.SIG_DFL),  # fails for SIGKILL, which needs none
            lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum]),
        ):
            try:
                prepare()
            except (OSError, ValueError):
                pass
        try:
            os.kill(os.getpid(), signum)
        except OSError:
            pass
    os._exit(code & 0xFF)


def _call_child(child: Callable[[], int]) -> int:
    """child()'s exit code: its return value, a SystemExit's code, or 1 after printing the
    traceback of any other exception (as the interpreter itself would exit)."""
    try:
        result = child()
        return 0 if result is None else int(result)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever happens, an exit code comes out
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
        return 1


def _run_child_and_exit(child: Callable[[], int]) -> NoReturn:
    """Body of a forked child: run child() and _exit with its code, never return into the
    caller's stack (which would run the parent's code a second time)."""
    code = 70
    try:
        code = _call_child(child)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code & 0xFF)


def _wait_for(pid: int) -> int:
    """waitpid until ``pid`` ends; if the wait itself is interrupted by an exception (e.g.
    KeyboardInterrupt), kill the child first so it never outlives its supervisor."""
    try:
        _, status = os.waitpid(pid, 0)
        return status
    except BaseException:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise


class _Stopped(BaseException):
    """SIGTERM reached the supervising process: the grader asks it to end its worker now (its
    stop after a timeout), with the sweep or the namespace cleaning up behind it."""


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped()


def _catch_stop() -> None:
    try:
        signal.signal(signal.SIGTERM, _raise_stopped)
    except ValueError:
        pass  # not the main thread: SIGTERM keeps its default action and the grader's SIGKILL follows


def _fork_supervised() -> int:
    """os.fork() with SIGTERM held back across it, so that the child never runs the parent's stop
    handler: it gets the default action back before the signal is let through again."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return pid
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _supervise(pid: int) -> int:
    """The exit code of child ``pid``; on SIGTERM the child is killed first and 128 + SIGTERM is
    returned, so the caller still cleans up (sweep) and exits promptly."""
    try:
        return _exit_code(_wait_for(pid))
    except _Stopped:
        return 128 + signal.SIGTERM


def _children_of(pid: int) -> list[int]:
    kids: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids.update(int(x) for x in fh.read().split())
        return sorted(kids)
    except (OSError, ValueError):
        pass
    # Kernels without CONFIG_PROC_CHILDREN: scan every process for its parent.
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                data = fh.read()
            fields = data[data.rfind(")") + 2 :].split()
            if int(fields[1]) == pid:
                kids.add(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(kids)


def _sweep_descendants(deadline_s: float = 5.0) -> bool:
    """Kill and reap every descendant. As a child subreaper, orphans (setsid + double fork
    included) are reparented to this process, so killing the direct children repeatedly reaches
    every generation. Only pids read from our own children lists are signalled, never -1.
    Returns True when no child is left."""
    deadline = time.monotonic() + deadline_s
    me = os.getpid()
    while True:
        for kid in _children_of(me):
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def _run_with_subreaper(child: Callable[[], int], why: str = "no PID namespace") -> int:
    """Fallback without namespaces: child() runs in a forked child while this process, a child
    subreaper, waits and then kills whatever the child left behind. It runs in a fork rather than
    in-process so the sweep also happens when child() calls os._exit or is killed. Weaker than a
    PID namespace: if this process is SIGKILLed, the sweep never runs and a sleeping escapee
    survives until the machine's init reaps it."""
    global _PID_NS_STATE
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        reaper = "child subreaper + kill sweep"
    except OSError as exc:
        reaper = f"no subreaper ({exc.strerror}): only direct children are swept"
    parent = os.getpid()
    _catch_stop()
    try:
        pid = _fork_supervised()
    except OSError:
        # Cannot fork at all: run in-process, then sweep what it left.
        _PID_NS_STATE = f"{why}; child() ran in-process ({reaper})"
        try:
            return _call_child(child)
        finally:
            _sweep_descendants()
    if pid == 0:
        _PID_NS_STATE = f"{why}; fallback: {reaper}"
        try:
            set_parent_death_signal()
        except OSError:
            pass
        if os.getppid() != parent and os.getpid() != 1:  # in a PID namespace getppid() is 0
            _die_now()
        _run_child_and_exit(child)
    try:
        return _supervise(pid)
    finally:
        _sweep_descendants()


def _unshare_pid_namespace() -> str:
    """New PID namespace for the next fork: directly when privileged, else together with a user
    namespace. Raises OSError when neither is allowed."""
    try:
        _unshare(CLONE_NEWPID)
        return "PID 1 of a new PID namespace"
    except OSError as first:
        if first.errno not in (errno.EPERM, errno.EINVAL, errno.ENOSPC, errno.EUSERS):
            raise
    return "PID 1 of a new PID namespace (inside a new " + _enter_user_namespace(CLONE_NEWPID) + ")"


class NamespaceStuck(RuntimeError):
    """Returning to our own PID namespace failed: every later fork of this process would land in
    one shared namespace. The process must not fork workers any more (the fork server exits)."""


class NamespaceForks:
    """Forks each child straight into a PID namespace of its own, as its PID 1, for a process
    that forks many (the fork server). run_in_pid_namespace needs a supervising process per
    child because unshare(CLONE_NEWPID) changes where *all* later children of the caller go; a
    process privileged over its own PID namespace can undo that after each fork (setns back to
    its own namespace), so the child needs no supervisor and the parent reaps it directly: one
    fork and one exit per child instead of two.

    ``open()`` returns None where this process may not (it is not privileged in its user
    namespace, or the kernel refuses); ``behind_user_namespace()`` then makes a process that
    may. Where neither works, the children use run_in_pid_namespace themselves."""

    def __init__(self, home: int) -> None:
        self.home = home  # our own PID namespace, to return to after each fork

    @classmethod
    def open(cls) -> NamespaceForks | None:
        try:
            home = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        forks = cls(home)
        try:
            _unshare(CLONE_NEWPID)
        except OSError:
            os.close(home)
            return None
        forks._return_home()
        return forks

    @classmethod
    def behind_user_namespace(cls) -> NamespaceForks | None:
        """For a process not privileged over its own PID namespace: a user namespace of its own,
        and in it a PID namespace whose PID 1 is privileged over it and so can fork children into
        namespaces of their own. Three processes take part: this one (the caller), a middle one
        that makes the namespaces, and their PID 1, where this returns the forks. The caller and
        the middle process never return once that worked: each waits for the next with every
        other descriptor closed, and ends the way it ended; each dies with its parent
        (parent-death signal), so killing the caller ends them all, and PID 1 takes every
        process of its namespace with it. When the set-up fails (no user namespaces, or, as
        where a security module strips them of their capabilities, no PID namespaces made from
        one), the caller gets None, unchanged.

        The PID 1's process ids are those of its own namespace: whoever asks it for children
        must learn their ids as the world outside sees them (fork server: SCM_CREDENTIALS)."""
        caller = os.getpid()
        ready_r, ready_w = os.pipe()
        try:
            middle = os.fork()
        except OSError:
            os.close(ready_r)
            os.close(ready_w)
            return None
        if middle == 0:  # the middle process
            try:
                os.close(ready_r)
                set_parent_death_signal()
                if os.getppid() != caller:
                    _die_now()
                _enter_user_namespace(CLONE_NEWPID, strict=True)
                alive_r, alive_w = os.pipe()
                init = os.fork()
            except BaseException:  # noqa: BLE001 - no namespaces here: the caller carries on alone
                os._exit(1)
            if init == 0:  # PID 1 of the new namespace
                os.close(alive_w)
                set_parent_death_signal()
                if select.select([alive_r], [], [], 0)[0]:  # the middle process died before that
                    _die_now()
                os.close(alive_r)
                forks = cls.open()
                if forks is None:  # the namespace gave no privilege: the caller carries on alone
                    os._exit(1)
                os.write(ready_w, b"1")
                os.close(ready_w)
                return forks
            _wait_and_follow(init, alive_w)
        os.close(ready_w)
        try:
            ready = os.read(ready_r, 1) == b"1"  # end-of-file: the middle process gave up
        finally:
            os.close(ready_r)
        if not ready:
            os.waitpid(middle, 0)
            return None
        _wait_and_follow(middle)

    def _return_home(self) -> None:
        try:
            _check(_libc().setns(self.home, CLONE_NEWPID), "setns(CLONE_NEWPID)")
        except OSError as exc:
            raise NamespaceStuck(f"cannot return to the PID namespace of the fork server: {exc.strerror}") from None

    def fork(self) -> int:
        """os.fork() into a new PID namespace: 0 in the child (PID 1 there), the child's pid in
        the parent, whose own later children go where they went before. Raises OSError when the
        namespace or the fork fails (nothing is left changed), NamespaceStuck when the way back
        fails (the child, if any, is killed first)."""
        global _PID_NS_STATE
        _unshare(CLONE_NEWPID)
        try:
            pid = os.fork()
        except OSError:
            self._return_home()
            raise
        if pid == 0:
            _PID_NS_STATE = FORKED_AS_INIT
            os.close(self.home)
            return 0
        try:
            self._return_home()
        except NamespaceStuck:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        return pid


def close_descriptors_except(*keep: int) -> None:
    """Close every descriptor above the standard streams but ``keep``."""
    high = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536
    start = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, max(high, start))


def _wait_and_follow(pid: int, *keep: int) -> NoReturn:
    """Close every descriptor but the standard streams (and ``keep``), wait for child ``pid``
    and end as it ended."""
    close_descriptors_except(*keep)
    relay_exit(_supervise(pid))


FORKED_AS_INIT = "PID 1 of a new PID namespace, forked so by the fork server: every process left in it dies with this one"


def forked_as_namespace_init() -> bool:
    """Whether NamespaceForks.fork made this process (PID 1 of its own PID namespace)."""
    return _PID_NS_STATE == FORKED_AS_INIT and os.getpid() == 1


def run_as_namespace_init(child: Callable[[], int]) -> NoReturn:
    """What run_in_pid_namespace's child does, for a process NamespaceForks made: run child()
    and exit with its code; the namespace, and every process in it, ends with this one."""
    _run_child_and_exit(child)


def run_in_pid_namespace(child: Callable[[], int]) -> int:
    """If possible unshare(CLONE_NEWPID) (with a user namespace when not root) and fork: the child
    becomes PID 1 of a new namespace and runs child(); when it exits the kernel kills every
    process left in the namespace (setsid and double-fork escapes die too). The parent waits,
    relays the exit status, and dies with the grader (parent-death signal). A SIGTERM to the
    parent (the grader's stop after a timeout) kills the child at once and returns. Falls back to
    a subreaper + kill sweep when namespaces are not allowed. Inherited file descriptors (the
    result pipe) are kept: fork shares them.

    Returns child()'s exit code, or 128 + N when the child was killed by signal N; end the
    process with ``relay_exit(code)`` so the grader sees the same status as without the wrapper.
    Call it once per process: the unshare changes where this process's later children go. Only
    the forked child runs child(); this function returns in the parent.
    """
    global _PID_NS_STATE
    expected_ppid = os.getppid()
    try:
        set_parent_death_signal()  # the wrapper dies with the grader, the child with the wrapper
    except OSError:
        pass
    if os.getppid() != expected_ppid:
        _die_now()
    _catch_stop()
    try:
        how = _unshare_pid_namespace()
    except OSError as exc:
        return _run_with_subreaper(child, f"PID namespace unavailable ({exc.strerror})")
    # A pipe only the wrapper holds open: the child sees EOF if the wrapper died before the
    # child's own PR_SET_PDEATHSIG took effect (getppid() cannot tell: it is 0 in the namespace).
    alive_r, alive_w = os.pipe2(os.O_CLOEXEC)
    try:
        pid = _fork_supervised()
    except OSError as exc:
        os.close(alive_r)
        os.close(alive_w)
        return _run_with_subreaper(child, f"fork into the PID namespace failed ({exc.strerror})")
    if pid == 0:
        _PID_NS_STATE = how
        os.close(alive_w)
        try:
            set_parent_death_signal()
        except OSError:
            pass
        if select.select([alive_r], [], [], 0)[0]:
            _die_now()
        os.close(alive_r)
        _run_child_and_exit(child)
    os.close(alive_r)
    try:
        return _supervise(pid)
    finally:
        os.close(alive_w)


# --------------------------------------------------------------------------------------------
# Probe
# --------------------------------------------------------------------------------------------


def _probe_body(policy: Policy, out_fd: int) -> int:
    layers = apply_isolation(policy)
    payload = json.dumps([[layer.name, layer.active, layer.detail] for layer in layers]).encode()
    view = memoryview(payload)
    while view:
        view = view[os.write(out_fd, view) :]
    return 0


def probe_layers(timeout_s: float = 15.0) -> list[Layer]:
    """Cheap check of which layers would work on this machine, done in a throwaway forked child;
    used by `grade --sandbox-info`. The child goes through run_in_pid_namespace and
    apply_isolation exactly as a worker would, on a scratch policy, and reports over a pipe."""
    base = tempfile.mkdtemp(prefix="grader-probe-")
    try:
        os.chmod(base, 0o711)  # enterable by the unprivileged user, like any workdir parent
        workdir = os.path.join(base, "work")
        shown = os.path.join(base, "ro")
        secret = os.path.join(shown, "hidden")
        os.makedirs(workdir)
        os.makedirs(secret, mode=0o755)
        os.chmod(shown, 0o755)
        policy = Policy(
            workdir=workdir,
            readable=default_readable_paths(shown),
            hidden=(secret,),
            cpu_seconds=10,
            memory_bytes=_vm_size() + 2**30,
            file_bytes=2**20,
            open_files=256,
            processes=64,
        )
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            return [Layer("probe", False, f"cannot fork a probe: {exc}")]
        if pid == 0:
            code = 1
            try:
                os.close(read_fd)
                code = run_in_pid_namespace(lambda: _probe_body(policy, write_fd))
            finally:
                os._exit(code)
        os.close(write_fd)
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                    break
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            try:
                os.kill(pid, signal.SIGKILL)  # it is done or stuck; either way it ends now
            except OSError:
                pass
            os.waitpid(pid, 0)
        try:
            return [Layer(str(n), bool(a), str(d)) for n, a, d in json.loads(b"".join(chunks))]
        except (ValueError, TypeError):
            return [Layer("probe", False, "the probe child reported nothing (crashed or timed out)")]
    finally:
        shutil.rmtree(base, ignore_errors=True)
