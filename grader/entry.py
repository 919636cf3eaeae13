"""Where a candidate's function is: the suite's ``entry`` and how a repository's file is loaded.

A suite may name the entry point of a take-home that asks for a repository::

    entry: src/model/attention.py:attention

that is a path relative to the candidate's folder and, after the colon, the function's name
(optional: the suite's ``function`` otherwise). :func:`resolve_entry` finds that file in one
candidate's checkout; the folder discovery of batch grading calls it for each candidate.

A file inside a package (its folder has an ``__init__.py``, up to the candidate's folder) is
imported by its dotted name, so ``from .utils import softmax`` works as it does for the candidate;
the candidate's folder and its ``src/`` are on the search path too, so ``from model.utils import``
and ``from src.model.utils import`` work as well. See :func:`load_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable

from grader.bounds import function_name_problem

SUBMISSION_SUFFIXES = (".py", ".ipynb")
# When a candidate folder is graded with no entry in the suite: these names, in this order.
CONVENTIONAL = ("attention.py", "solution.py", "attention.ipynb", "solution.ipynb")


class EntryError(ValueError):
    """This candidate's folder has no usable entry file; str() is one line."""


@dataclass(frozen=True)
class Entry:
    """The suite's entry point: the file, and the function in it, that a checkout must provide."""

    path: PurePosixPath  # relative to the candidate's folder
    function: str | None  # None: the suite's function

    def __str__(self) -> str:
        return f"{self.path}:{self.function}" if self.function else str(self.path)


def parse_entry(text: str) -> Entry:
    """``path/to/file.py[:function]``. Raises ValueError with the reason."""
    path_text, _, function = text.partition(":") if text.count(":") == 1 else (text, "", "")
    if text.count(":") > 1:
        raise ValueError("expected 'path/to/file.py:function' with one colon")
    problem = function_name_problem(function) if function else None
    if problem:
        raise ValueError(problem)
    if not path_text or "\\" in path_text:
        raise ValueError("expected a relative path with forward slashes, such as src/model/attention.py:attention")
    path = PurePosixPath(path_text)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError("the entry must be a path inside the candidate's folder (relative, without '..')")
    if path.suffix not in SUBMISSION_SUFFIXES:
        raise ValueError("the entry must be a .py file or a .ipynb notebook")
    return Entry(path, function or None)


def resolve_entry(folder: Path, entry: Entry) -> Path:
    """The entry's file inside ``folder``. Raises EntryError when it is missing or leads out of the
    folder (a symbolic link to elsewhere is not the candidate's code)."""
    candidate = folder / Path(*entry.path.parts)
    if not candidate.is_file():
        raise EntryError(f"{entry.path}: no such file in the candidate's folder")
    root = folder.resolve()
    if not candidate.resolve().is_relative_to(root):
        raise EntryError(f"{entry.path}: leads outside the candidate's folder")
    return candidate


def conventional_file(folder: Path) -> Path:
    """The minimal rule for ``grade --candidate DIR`` when the suite names no entry: the first of
    attention.py, solution.py, attention.ipynb, solution.ipynb directly in DIR. (Batch grading's
    discovery applies the fuller rule; this is what a single candidate checkout needs.)
    Raises EntryError."""
    for name in CONVENTIONAL:
        if (folder / name).is_file():
            return folder / name
    raise EntryError(f"no {', '.join(CONVENTIONAL[:-1])} or {CONVENTIONAL[-1]} in the candidate's folder; name the file with `entry:` in the suite")


@dataclass(frozen=True)
class LoadPlan:
    """How the worker loads one submission file."""

    root: Path  # the folder whose files are the submission's (tracebacks are shown relative to it)
    sys_path: tuple[Path, ...]  # put first on the worker's sys.path
    module: str | None  # the dotted name to import, for a file inside a package below ``root``

    def as_request(self) -> dict[str, object]:
        return {"root": str(self.root), "sys_path": [str(p) for p in self.sys_path], "module": self.module}


def load_plan(file: Path, root: Path | None = None) -> LoadPlan:
    """The plan for ``file``; ``root`` is the candidate's folder (default: the file's folder, so a
    lone file is loaded on its own, exactly as before)."""
    file = file.resolve()
    root = (root or file.parent).resolve()
    parts = [file.stem]
    folder = file.parent
    # Climb through packages, never above the candidate's folder.
    while folder != root and folder.is_relative_to(root) and (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    dotted = ".".join(parts) if len(parts) > 1 and all(p.isidentifier() for p in parts) and file.suffix == ".py" else None
    search = [folder if dotted else file.parent, root]
    if (root / "src").is_dir():
        search.append(root / "src")
    unique = tuple(dict.fromkeys(search))
    return LoadPlan(root=root, sys_path=unique, module=dotted)


# The observation cuts each name the worker sends at this many characters: a name this long may
# be the start of a longer one, and is never put in a command of a fix.
NAME_LIMIT = 100


def attention_candidate(available: Iterable[str]) -> str | None:
    """The one callable that looks like the attention under another name (it contains
    "attention" or "attn"), or None when none or several do. The names come from the
    submission: only a plain identifier shorter than NAME_LIMIT may appear in a fix's command."""
    # A CapWords name is a class by convention (an nn.Module): called with (Q, K, V) it would
    # construct one, so it is never offered as the function.
    found = sorted({n for n in available if ("attention" in n.lower() or "attn" in n.lower()) and not n[:1].isupper()})
    if len(found) != 1:
        return None  # several: the message lists them all, and the fix stays generic
    name = found[0]
    return name if name.isidentifier() and len(name) < NAME_LIMIT else None
