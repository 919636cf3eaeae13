"""Paths as the layers see them: canonical forms, what a Python worker must still read after
isolation, and whether a uid can reach a path through the classic permission bits.

The last matters because the worker drops to uid 65534 when it runs as root: afterwards the
permission bits apply again, and a readable path below a folder only root may enter becomes
unreachable (``mounts`` then exposes it; ``identity`` keeps root when it cannot).
"""

from __future__ import annotations

import functools
import json
import os
import site
import stat
import sys
import sysconfig
import tempfile
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


# The grader's import folders, in its own order, for the worker and the fork server: both start
# with -I, which ignores PYTHONPATH and the user site, and take this path instead as it is
# (env.IMPORT_BOOT, adopt_import_path; see import_path).
IMPORT_PATH_VAR = "GRADER_IMPORT_PATH"


def import_path(entries: list[str] | None = None) -> tuple[str, ...]:
    """The folders (and zip files) this interpreter imports from: ``sys.path`` after site
    processing (``.pth`` entries, PYTHONPATH, the user site, a base prefix), canonical, existing,
    in order. Left out: '' and the current folder (the grader may run from its own checkout or
    from the candidates' folder), the home folder and any folder holding it or the temporary
    folder (the workers' own folders live there); folders below the home folder (~/.local/lib/...)
    stay."""
    cwd = os.path.realpath(os.getcwd())
    home = os.path.realpath(os.path.expanduser("~"))
    tmp = os.path.realpath(tempfile.gettempdir())
    found: list[str] = []
    for entry in sys.path if entries is None else entries:
        if not isinstance(entry, str) or not entry:
            continue
        real = os.path.realpath(os.path.abspath(entry))
        if real == cwd or _beneath(home, real) or _beneath(tmp, real) or not os.path.exists(real):
            continue
        if real not in found:
            found.append(real)
    return tuple(found)


def adopt_import_path() -> None:
    """In a process of the grader's started with -I: make sys.path the grader's import path
    (IMPORT_PATH_VAR), in the grader's order, so that every import resolves to the file it
    resolves to in the grader. Not merely appended: a folder the interpreter's own path has too
    (site-packages) keeps the grader's place, after the standard library and any PYTHONPATH
    folder. The worker and the fork server have it from env.IMPORT_BOOT already (this is then a
    no-op); another boot that put a folder first to import the grader gets the grader's order."""
    if not sys.flags.isolated or IMPORT_PATH_VAR not in os.environ:
        return
    try:
        entries = json.loads(os.environ[IMPORT_PATH_VAR])
    except ValueError:
        return
    if isinstance(entries, list) and all(isinstance(entry, str) and entry for entry in entries):
        sys.path[:] = entries


def default_readable_paths(*extra: str) -> tuple[str, ...]:
    """What a Python worker needs to read after isolation, plus ``extra``.

    The interpreter's prefixes (stdlib, lib-dynload, site-packages: needed for every module
    imported after isolation, and for tracebacks), every other folder the grader itself imports
    from (its ``sys.path`` after site processing: ``.pth`` entries, PYTHONPATH, the user site, a
    base prefix; see import_path), the system library folders (extension modules dlopen
    libz, libffi, ... on first import) and what CPU-detecting libraries read (torch's and
    XNNPACK's cpuinfo print an error when /proc/cpuinfo is hidden). Never the current folder or
    the home folder, which may hold the grader's source tree or other candidates: sys.path
    entries equal to them are left out. Hidden paths below any of these stay hidden (the policy
    says so, and every layer applies it). Add the submission's folder.
    """
    return tuple(_outermost([*_interpreter_paths(tuple(sys.path), os.getcwd()), *_existing(extra)]))


# Read-only views the worker gets of the machine's CPUs (cpuinfo in torch and XNNPACK in JAX
# parse them at import; without them they print to the submission's output).
CPU_INFO_PATHS = ("/proc/cpuinfo", "/sys/devices/system/cpu")


@functools.lru_cache(maxsize=4)
def _interpreter_paths(search_path: tuple[str, ...], cwd: str) -> tuple[str, ...]:
    """The fixed part of default_readable_paths, resolved once per process (a batch asks for it
    once per submission); computed again when sys.path or the current folder change."""
    candidates = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    paths = sysconfig.get_paths()
    candidates += [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    try:
        candidates += site.getsitepackages()
    except AttributeError:
        pass  # old virtualenv's site module
    candidates += import_path(list(search_path))
    candidates += ["/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache", *CPU_INFO_PATHS]
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


# In every process of the grader's started with -I, before numpy is imported: each imports this
# module first (worker.py; env.py for the fork server).
adopt_import_path()
