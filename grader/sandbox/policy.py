"""What a worker may read, what it must never see, and what the grader insists on.

Computed here, in the grader, and sent with the request: the worker takes its sandbox from the
request and computes nothing from the submission, whose code it has not loaded yet anyway.

* readable: what Python and numpy need (the interpreter's prefixes, the system libraries) and
  the submission's own folder. Never the grader's source tree.
* hidden: the grader's package folder (the reference implementation and the diagnosis catalogue
  live in it), the stored references and the default suite, wherever they are (next to
  ``grader/`` in a source checkout, inside it when installed), and the references of the suite in
  use. Hidden wins over readable: a hidden folder inside a readable one stays unreadable.
* masked: a candidate's ``.git`` folders (``actions/checkout`` leaves the job's token in
  ``.git/config``), covered by the mount namespace only: a Landlock carve-out would make the
  checkout's own folder unlistable and its helper modules unimportable.
* alone: a loose file of a batch folder is readable on its own, never its folder, so it cannot
  read or import its neighbours (other candidates' files).
* the layers to apply (all, unless a test selects fewer) and, in strict mode, the guarantees
  without which the worker must not load the submission at all.
"""

from __future__ import annotations

from dataclasses import dataclass
import functools
import os
from pathlib import Path
from typing import Any, Iterable

from grader.refdata import default_reference_dir, default_suite_path
from grader.sandbox.isolation import GUARANTEES, default_readable_paths

PACKAGE_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SandboxSettings:
    """The grader's demands on every worker's sandbox."""

    strict: bool = False  # refuse to load a submission unless every guarantee holds
    hidden: tuple[str, ...] = ()  # more paths the worker must not read (the suite's references)
    layers: frozenset[str] | None = None  # apply only these layers (tests); None: every layer
    # RLIMIT_NPROC counts every process of the worker's uid on the machine (all parallel workers
    # run as nobody when the grader is root), so it leaves room for many workers at once while
    # still stopping a fork storm; a worker itself needs one process.
    processes: int = 64
    open_files: int = 256
    # A batch's JAX compile cache (grader.jax_cache): one more read-only path of a JAX worker.
    compiled: str | None = None


def hidden_paths(extra: Iterable[str | Path] = ()) -> tuple[str, ...]:
    return _hidden_paths(tuple(str(path) for path in extra))


@functools.lru_cache(maxsize=8)
def _hidden_paths(extra: tuple[str, ...]) -> tuple[str, ...]:
    # Once per run, not once per submission: the grader's own folders do not move while it runs.
    candidates: list[str | Path] = [PACKAGE_DIR, default_reference_dir(), default_suite_path().parent, *extra]
    found: list[str] = []
    for path in candidates:
        resolved = str(Path(path).resolve())
        if Path(resolved).exists() and resolved not in found:
            found.append(resolved)
    return tuple(found)


def readable_paths(submission: Path, folders: tuple[str, ...] = ()) -> tuple[str, ...]:
    # The file itself too: the worker checks every readable path against the permission bits
    # before it gives up root, and a 0600 file in a 0755 folder must count. ``folders`` are the
    # candidate's import folders (a repository's root or src/) when the file is in a package.
    return (*default_readable_paths(str(submission.parent), *folders), str(submission))


SECRET_NAMES = frozenset({".git"})
MAX_SECRET_SCAN = 20000  # entries of a checkout looked through for .git folders


def checkout_secrets(root: Path) -> tuple[str, ...]:
    """Every ``.git`` (folder, or a submodule's file) inside ``root``, the outermost ones, without
    following links. Bounded: past MAX_SECRET_SCAN entries the rest is not looked at (discovery
    refuses links out, so what is missed is only deep inside a huge checkout)."""
    found: list[str] = []
    stack = [str(root)]
    seen = 0
    while stack and seen <= MAX_SECRET_SCAN:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            if entry.name in SECRET_NAMES and not entry.is_symlink():
                found.append(entry.path)
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return tuple(sorted(found))


def request_meta(
    submission: Path,
    workdir: str,
    settings: SandboxSettings,
    folders: tuple[str, ...] = (),
    root: Path | None = None,
    alone: bool = False,
) -> dict[str, Any]:
    """The "sandbox" part of a worker request (``submission`` resolved; ``root`` the candidate's
    folder; ``alone`` for a loose file, which may read itself and nothing beside it)."""
    readable = readable_paths(submission, () if alone else folders)
    if alone:
        readable = tuple(p for p in readable if p != str(submission.parent))
    if settings.compiled is not None:
        readable += (settings.compiled,)
    return {
        "workdir": workdir,
        "readable": list(readable),
        "hidden": list(hidden_paths(settings.hidden)),
        "masked": list(checkout_secrets(root)) if root is not None and not alone else [],
        "processes": settings.processes,
        "open_files": settings.open_files,
        "layers": None if settings.layers is None else sorted(settings.layers),
        "require": list(GUARANTEES) if settings.strict else [],
        "compiled": settings.compiled,
    }
