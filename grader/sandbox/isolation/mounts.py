"""The mount namespace: the folders shared with others replaced by a view of the worker's own
paths, hidden paths covered by empty read-only mounts, readable paths made reachable for the
unprivileged user, and a fresh /proc for PID 1 of a PID namespace.

/ is made private first: otherwise the mounts would propagate to the host and hide the
references from the grader itself. It must come before Landlock, since a Landlock-restricted
process can no longer mount.

Paths and the unprivileged user: after setuid(65534) the classic permission bits apply again.
A readable path below a folder only root may enter (an interpreter installed in root's home
folder, mode 0700) would become unreachable, and every later import of a stdlib module that was
not imported yet would fail. In the private mount namespace such a blocking folder is replaced
by a read-only tmpfs holding only bind mounts of the readable paths below it. Without a mount
namespace, the unprivileged-user layer still drops privileges and lists the unreachable paths
in its detail.
"""

from __future__ import annotations

import os
import pwd
import stat

from grader.sandbox.isolation.model import Layer, Policy, _failed
from grader.sandbox.isolation.paths import _beneath, _existing, _first_blocker, _outermost, _real, _unreachable
from grader.sandbox.isolation.syscalls import (
    CLONE_NEWNS,
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    _mount,
    _unshare,
)


def _expose_only(folder: str, targets: list[str]) -> None:
    """Cover ``folder`` with a read-only tmpfs (mode 0755) holding only the chain of folders that
    leads to each of ``targets``, each bind-mounted from the original (writable where the
    original is: the worker's own folder stays writable). Only this mount namespace sees it."""
    # O_PATH handles taken before the folder is covered; bind mounts are made from them.
    handles = {t: os.open(t, os.O_PATH | os.O_CLOEXEC) for t in targets}
    try:
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
        for target, fd in handles.items():
            parent = os.path.dirname(target)
            os.makedirs(parent, mode=0o755, exist_ok=True)
            # makedirs is subject to the umask; the skeleton must be enterable by any uid.
            walk = parent
            while _beneath(walk, folder):
                os.chmod(walk, 0o755)
                if walk == folder:
                    break
                walk = os.path.dirname(walk)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.makedirs(target, mode=0o755, exist_ok=True)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        try:
            _mount(None, folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        except OSError:
            pass  # the skeleton stays writable by root only: the unprivileged uid cannot write it
    finally:
        for fd in handles.values():
            os.close(fd)


def _shared_folders() -> list[str]:
    """Folders where the worker could find what is not its own: the temporary folders (other
    workers' folders, whose names inotify on /tmp would show; sockets left there), /run (the
    session bus and the grading user's service manager and ssh-agent under /run/user/UID) and
    the grading user's home. A unix socket is reachable by path whatever Landlock says (ABI <= 7
    does not control connect), so these folders must be gone from the worker's view."""
    folders = ["/tmp", "/var/tmp", "/dev/shm", "/run", "/var/run"]
    try:
        folders.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass  # a uid without a passwd entry (some containers): it has no home to hide
    return [f for f in dict.fromkeys(_real(f) for f in _existing(folders)) if f != "/" and os.path.isdir(f)]


def _cover_shared(wanted: list[str]) -> list[str]:
    """Replace each shared folder (see _shared_folders) by a view of only the ``wanted`` paths
    below it (the worker's own folder, the submission, an install in the home folder). A folder
    that a wanted path contains or is (a submission graded from /tmp itself) stays as it is.
    Returns notes for the layer's detail."""
    notes: list[str] = []
    for folder in _shared_folders():
        if any(_beneath(folder, path) for path in wanted):
            notes.append(f"{folder} left in view: it is (inside) a path the worker reads")
            continue
        targets = _outermost(p for p in wanted if _beneath(p, folder))
        try:
            _expose_only(folder, targets)
        except OSError as exc:
            notes.append(f"cannot replace {folder}: {exc.strerror}")
            continue
        notes.append(f"{folder} replaced by a view of {len(targets)} path(s) of the worker")
    return notes


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
        _expose_only(blocker, targets)
        notes.append(f"{blocker} (not enterable by uid {uid}) replaced by a tmpfs exposing {len(targets)} path(s)")
    return notes


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
    wanted = _existing([*policy.readable, policy.workdir])
    notes += _cover_shared(wanted)
    if reach_for is not None:
        try:
            notes += _make_reachable(_unreachable(wanted, *reach_for), *reach_for)
        except OSError as exc:
            notes.append(f"making readable paths reachable failed: {exc}")
    covered = 0
    masked = [m for m in _outermost(_existing(policy.masked)) if not any(_beneath(m, h) for h in hidden)]
    for path in [*hidden, *masked]:
        if not os.path.lexists(path):
            # It existed before the readable paths were made reachable: a folder above it was
            # replaced by a tmpfs that holds only those paths. Out of sight already.
            covered += 1
            continue
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
    expected = len(hidden) + len(masked)
    secrets = f" (the checkout's .git: {len(masked)})" if masked else ""
    notes.insert(0, f"private mount namespace; {covered}/{expected} hidden path(s){secrets} covered by an empty read-only mount")
    return Layer("mount-namespace", covered == expected, "; ".join(notes))
