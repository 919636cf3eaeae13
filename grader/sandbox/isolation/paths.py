"""Paths as the layers see them: canonical forms, what a Python worker must still read after
isolation, and whether a uid can reach a path through the classic permission bits.

The last matters because the worker drops to uid 65534 when it runs as root: afterwards the
permission bits apply again, and a readable path below a folder only root may enter becomes
unreachable (``mounts`` then exposes it; ``identity`` keeps root when it cannot).
"""

from __future__ import annotations

import functools
import os
import site
import stat
import sys
import sysconfig
from collections.abc import Iterable


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
