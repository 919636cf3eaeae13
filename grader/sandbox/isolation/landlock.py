"""Landlock: the filesystem, TCP and scoping rules the worker restricts itself to.

The rulesets are built (paths opened with O_PATH) while the process is still privileged and
after the mounts, so the rules point at the final mount tree, but only enforced last, so that
none of the other steps is itself restricted. restrict_self needs no_new_privs without
CAP_SYS_ADMIN. Every right is masked by the ABI version the kernel has ("best effort", as the
Landlock documentation recommends).

Hidden paths inside a readable folder leave the folders above them traverse-only (Landlock
cannot grant "list this folder but not that subfolder"). Landlock (ABI <= 7) controls neither
UDP nor connecting to a pathname unix socket: the network namespace removes UDP, and after the
drop to uid 65534 only world-writable sockets stay connectable.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
from collections.abc import Callable
from dataclasses import dataclass

from grader.sandbox.isolation.model import Layer, Policy, _failed
from grader.sandbox.isolation.paths import _beneath, _existing, _outermost, _real
from grader.sandbox.isolation.syscalls import CAP_SYS_ADMIN, PR_SET_NO_NEW_PRIVS, _has_cap, _prctl, _syscall

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


def _landlock_abi() -> int:
    """The Landlock ABI version, or 0 when Landlock is missing or disabled."""
    if platform.machine().startswith("alpha"):
        return 0
    try:
        return _syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0), ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:
        return 0  # ENOSYS: not built in; EOPNOTSUPP: disabled at boot


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


def _prepare(policy: Policy, hidden: list[str], want: Callable[[str], bool]) -> _Rulesets:
    """_build_rulesets, with a surprising error reported in the landlock-fs layer instead of
    raised: one error costs one layer, never the worker."""
    try:
        return _build_rulesets(policy, hidden, want)
    except Exception as exc:  # noqa: BLE001
        return _Rulesets(abi=_landlock_abi(), fs_error=f"{type(exc).__name__}: {exc}")


def _enforce(rs: _Rulesets, threads: int) -> list[Layer]:
    """Set no_new_privs when restrict_self needs it, then enforce every ruleset built."""
    if any(fd is not None for fd in (rs.fs_fd, rs.net_fd, rs.scope_fd)) and not _has_cap(CAP_SYS_ADMIN):
        try:
            _prctl(PR_SET_NO_NEW_PRIVS, 1)  # restrict_self requires it without CAP_SYS_ADMIN
        except OSError:
            pass
    return _restrict(rs, threads)
