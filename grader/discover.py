"""Finding the submissions in the paths the user gave.

* A ``.py`` file is one submission.
* A folder given to ``grade DIR`` holds many: each ``.py`` file directly inside it is one
  submission, and each subfolder is one candidate's checkout.
* A candidate's checkout (a subfolder, or the folder given to ``grade --candidate DIR``) is one
  submission whose file is found by :class:`Rule`.

The rule for a checkout, in order (documented in the README):

0. when the suite names an ``entry`` (``src/model/attention.py:attention``), that file;
1. with ``--submission-file PATTERN``: the one file whose path inside the checkout matches the
   glob ``PATTERN`` (``src/attn.py``, ``*/attention.py``);
2. otherwise the one file that *defines* the graded function at module level (``def attention``,
   ``attention = ...``, ``class attention``; an import of it, or a definition under
   ``if __name__ == "__main__":``, which importing does not run, does not count), found by parsing
   every Python file with ``ast``: nothing is imported or run. Test files (``test_*.py``,
   ``*_test.py``, ``conftest.py``) are not candidates;
3. when several files define it, the one with the most conventional name wins
   (``attention.py``, then ``solution.py``, then ``submission.py``); when that does not decide,
   the candidate gets an error report naming the files;
4. when none defines it, a lone file with a conventional name is graded anyway (so a file with a
   syntax error is reported as ``load-error``, not lost), a notebook ``attention.ipynb`` or
   ``solution.ipynb`` included; otherwise an error report.

A notebook (``.ipynb``) given as a path, or directly inside a folder given to ``grade DIR``, is
one submission like a ``.py`` file.

Looking for the submission file skips hidden folders, ``__pycache__``, ``node_modules``,
``site-packages``, ``venv``, ``build``, ``dist`` and any virtual environment (a folder holding
``pyvenv.cfg``); it never visits a folder twice (symlink loops), and stops after ``MAX_FILES``
Python files.

Links never widen what a submission may read. Before the grader opens anything of a checkout,
every symbolic link in it (outside ``.git/``) is resolved, and a checkout with a link whose target
is outside the checkout (``src -> /``, ``src -> ..``, an entry file or notebook that points
elsewhere) gets an error report; the batch goes on. In a folder given to ``grade DIR``, an entry
that is itself a symbolic link is refused the same way: each candidate's submission is their own
file or folder, never a neighbour's.

The content hash that keys the result cache covers every file the worker may read, skipped
folders included: each regular file and each link of the checkout (never ``.git/``, which the
worker never sees), framed by its relative path and its length.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from grader.entry import NAME_LIMIT, Entry, EntryError, attention_candidate, conventional_file, resolve_entry
from grader.errors import UsageError
from grader.frameworks import MAX_PARSED_BYTES, parse_quietly
from grader.fsutil import read_regular

CONVENTIONAL = ("attention.py", "solution.py", "submission.py")
SUFFIXES = (".py", ".ipynb")  # what a file given directly, or lying in a graded folder, may be
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "build", "dist"})
MAX_FILES = 2000
MAX_PARSED_PER_CHECKOUT = 4 * MAX_PARSED_BYTES  # source parsed in search of the function, per checkout
MAX_CHECKOUT_BYTES = 64 * 1024 * 1024  # parsed or hashed per checkout, so a huge one cannot stall a batch
MAX_ENTRIES = 20000  # entries of a checkout looked at for links and for the hash
HIDDEN_DIRS = frozenset({".git"})  # never shown to the worker (CI tokens in .git/config), never hashed


class TooLarge(Exception):
    """A checkout with more Python source than MAX_CHECKOUT_BYTES: graded, but never cached."""


@dataclass(frozen=True)
class Rule:
    """How the submission file is found in a candidate's checkout."""

    function: str = "attention"
    pattern: str | None = None  # --submission-file
    conventional: tuple[str, ...] = CONVENTIONAL
    entry: Entry | None = None  # the suite's `entry:`, which decides before anything else


@dataclass(frozen=True)
class Submission:
    """One thing to grade: a file, or a candidate's checkout with the file found in it."""

    label: str  # what reports call it: the file, or the checkout folder as the user gave it
    file: Path | None  # the file to grade; None when the checkout has no usable one
    folder: Path | None = None  # the checkout, for candidates
    related: tuple[Path, ...] = ()  # every Python file of the checkout: they key the cache
    error: str | None = None  # why there is nothing to grade
    loose: bool = False  # a file found in a folder of submissions: its worker may read it alone
    passed_over: tuple[Path, ...] = ()  # other files of the checkout that define the function too

    def content_hash(self) -> str:
        """SHA-256 over what the verdict depends on: every file the worker may read, each framed
        by its path relative to the folder it may read and by its length, so no two different
        folders hash alike. That is, for a checkout, its files (skipped folders included; never
        ``.git/``); for a file graded by name, its folder's (its helper modules and data load from
        there); for a loose file of a batch folder, which may read itself only, its bytes. Links
        are hashed as links (their target text), never followed. The folder's absolute path is
        hashed too: the submission sees where it runs (``__file__``, its tracebacks, numpy's
        warnings quote it), so a copy elsewhere may print otherwise. Raises OSError for an
        unreadable file and TooLarge for a folder over the byte or entry budget."""
        digest = hashlib.sha256(b"grader-content-4")
        if self.file is None:
            return digest.hexdigest()
        folder = self.folder if self.folder is not None else self.file.parent
        _frame(digest, b"P", os.fsencode(folder.resolve()), b"")
        if self.folder is None and self.loose:
            _frame(digest, b"F", self.file.name.encode("utf-8", "surrogateescape"), read_regular(self.file))
            return digest.hexdigest()
        entries = checkout_entries(folder)
        if sum(size for _, _, size in entries) > MAX_CHECKOUT_BYTES:
            raise TooLarge(self.label)
        for path, kind, _size in entries:
            name = os.path.relpath(path, folder).encode("utf-8", "surrogateescape")
            if kind == "link":
                _frame(digest, b"L", name, os.readlink(path).encode("utf-8", "surrogateescape"))
            else:
                _frame(digest, b"F", name, read_regular(path, follow=False))  # never blocking, never through a link
        _frame(digest, b"G", os.path.relpath(self.file, folder).encode("utf-8", "surrogateescape"), b"")
        return digest.hexdigest()


def _frame(digest: hashlib._Hash, kind: bytes, name: bytes, data: bytes) -> None:
    # Both lengths up front: a name and content can never be shifted into each other.
    digest.update(kind + struct.pack("<QQ", len(name), len(data)) + name + data)


def checkout_entries(root: Path) -> list[tuple[Path, str, int]]:
    """Every regular file ("file") and symbolic link ("link") of a checkout with its size, sorted,
    without following any link and without ``.git/``: what the worker may read there. Other
    kinds (FIFOs, sockets, devices) are left out: nothing is read from them. Raises TooLarge
    past MAX_ENTRIES entries."""
    found: list[tuple[Path, str, int]] = []
    stack = [root]
    seen = 0
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            raise TooLarge(str(root))
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                found.append((Path(entry.path), "link", 0))
            elif stat.S_ISDIR(info.st_mode):
                if entry.name not in HIDDEN_DIRS:
                    stack.append(Path(entry.path))
            elif stat.S_ISREG(info.st_mode):
                found.append((Path(entry.path), "file", info.st_size))
    return sorted(found)


def links_out(root: Path) -> list[str]:
    """The symbolic links of a checkout whose target resolves outside it, as ``name -> target``
    (at most five). Only link texts are read (lstat, readlink): nothing is opened. A checkout too
    big to look through counts as leading out: it cannot be shown not to."""
    real_root = Path(os.path.realpath(root))
    try:
        entries = checkout_entries(root)
    except TooLarge:
        return [f"more than {MAX_ENTRIES} entries: not looked through"]
    bad = []
    for path, kind, _ in entries:
        if kind == "link" and not Path(os.path.realpath(path)).is_relative_to(real_root):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            bad.append(f"{os.path.relpath(path, root)} -> {target}")
            if len(bad) == 5:
                break
    return bad


def _skipped_dir(path: Path) -> bool:
    name = path.name
    return name.startswith(".") or name in SKIP_DIRS or name.endswith(".egg-info") or (path / "pyvenv.cfg").exists()


def _is_test_file(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop on old Pythons
        return False


def python_files(root: Path, suffixes: tuple[str, ...] = (".py",)) -> list[Path]:
    """Every Python file of a checkout (with ``suffixes``, those files), by the walking rules
    above, in a stable order.

    Walked by hand rather than with os.walk, which either stays out of every linked folder or
    follows links without guarding against loops or against leaving the checkout."""
    real_root = root.resolve()
    found: list[Path] = []
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack and len(found) < MAX_FILES:
        folder = stack.pop()
        try:
            info = folder.stat()
            entries = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink() and not _inside(path, real_root):
                continue  # never leave the checkout
            try:
                if entry.is_dir():
                    if not _skipped_dir(path):
                        stack.append(path)
                elif entry.is_file() and entry.name.endswith(suffixes):
                    found.append(path)
            except OSError:
                continue
    return sorted(found)


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether the module's top level (including if/try/with blocks there) binds ``name`` by a
    definition or an assignment. Imports do not count: such a file only passes the function on."""
    body = list(tree.body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name) and leaf.id == name:
                        return True
        if isinstance(node, ast.If) and (guard := _main_guard(node.test)) is not None:
            # `if __name__ == "__main__":` does not run when the worker imports the file: a
            # definition there grades nothing (and its `else:` is what runs on import).
            body.extend(node.orelse if guard else node.body)
            continue
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            body.extend(node.body)
            body.extend(getattr(node, "orelse", []))
            body.extend(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                body.extend(handler.body)
        if hasattr(ast, "TryStar") and isinstance(node, ast.TryStar):  # Python 3.11+
            body.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                body.extend(handler.body)
    return False


def _main_guard(test: ast.expr) -> bool | None:
    """True for ``__name__ == "__main__"`` (either way round), False for ``!=``, None for any
    other condition."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    sides = [test.left, test.comparators[0]]
    named = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return isinstance(test.ops[0], ast.Eq) if named and main else None


def defines_function(path: Path, name: str) -> bool:
    """Parse (never import) ``path`` and tell whether it defines ``name`` at module level."""
    try:
        data = read_regular(path, MAX_PARSED_BYTES)
        if len(data) > MAX_PARSED_BYTES:
            return False
        tree = parse_quietly(data, filename=str(path))  # its warnings quote the file
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return _defines(tree, name)


def _names(path: Path, name: str) -> bool:
    """Whether ``name`` occurs in the file at all: the cheap test that spares most files the
    parser (a definition needs the name)."""
    try:
        data = read_regular(path, MAX_PARSED_BYTES)
        return len(data) <= MAX_PARSED_BYTES and name.encode() in data
    except OSError:
        return False


def _rank(path: Path, rule: Rule) -> int:
    return rule.conventional.index(path.name) if path.name in rule.conventional else len(rule.conventional)


def find_in_checkout(folder: Path, rule: Rule, label: str | None = None) -> Submission:
    """The submission of one candidate's checkout, or a Submission with ``error`` set."""
    label = label or str(folder)
    out = links_out(folder)
    if out:
        # Refused before any file is opened: a link out would make the target readable to the
        # worker (a readable folder is resolved) and let the grader read it as the submission.
        return Submission(label, None, folder, error=f"symbolic link(s) leading outside the candidate's folder: {', '.join(out)}; not graded (a link out would let the submission read its target): remove them, or copy what they point to into the folder")
    files = python_files(folder)
    if rule.entry is not None:
        try:
            return Submission(label, resolve_entry(folder, rule.entry), folder, tuple(files))
        except EntryError as exc:
            return Submission(label, None, folder, tuple(files), error=str(exc))
    if rule.pattern is not None:
        # A notebook may be the submission too (its helper modules beside it).
        matches = [f for f in files + _notebooks(folder) if fnmatch.fnmatch(f.relative_to(folder).as_posix(), rule.pattern)]
        if len(matches) == 1:
            return Submission(label, matches[0], folder, tuple(files) + ((matches[0],) if matches[0].suffix == ".ipynb" else ()))
        names = ", ".join(f.relative_to(folder).as_posix() for f in matches[:5])
        why = f"{len(matches)} files match --submission-file {rule.pattern!r}: {names}" if matches else f"no file matches --submission-file {rule.pattern!r}"
        return Submission(label, None, folder, tuple(files), error=why)
    candidates = [f for f in files if not _is_test_file(f.name)]
    definers = []
    budget = MAX_PARSED_PER_CHECKOUT
    for f in candidates:
        if not _names(f, rule.function):
            continue
        try:
            budget -= f.stat().st_size
        except OSError:
            continue
        if budget < 0:
            break  # the rest is not parsed; a conventional name below may still decide
        if defines_function(f, rule.function):
            definers.append(f)
    if definers:
        best = min(_rank(f, rule) for f in definers)
        chosen = [f for f in definers if _rank(f, rule) == best]
        if len(chosen) == 1:
            # Chosen by its name (attention.py before solution.py, ...): the others are said.
            return Submission(label, chosen[0], folder, tuple(files), passed_over=tuple(f for f in definers if f != chosen[0]))
        names = ", ".join(f.relative_to(folder).as_posix() for f in chosen[:5])
        why = f"{len(chosen)} files define {rule.function}(): {names}; choose one with --submission-file"
        return Submission(label, None, folder, tuple(files), error=why)
    named = [f for f in candidates if f.name in rule.conventional]
    if named:
        best = min(_rank(f, rule) for f in named)
        chosen = [f for f in named if _rank(f, rule) == best]
        if len(chosen) == 1:
            return Submission(label, chosen[0], folder, tuple(files))
    try:
        notebook = conventional_file(folder)  # attention.ipynb / solution.ipynb at the top
        if notebook.suffix == ".ipynb":
            return Submission(label, notebook, folder, (*files, notebook))
    except EntryError:
        pass
    tests = len(files) - len(candidates)
    left_out = f", {tests} test file{'s' if tests != 1 else ''} left out" if tests else ""
    why = f"no file defines {rule.function}() at module level (looked at {len(candidates)} Python file{'s' if len(candidates) != 1 else ''}{left_out})"
    return Submission(label, None, folder, tuple(files), error=why + _another_name(folder, candidates, rule.function))


def _notebooks(folder: Path) -> list[Path]:
    """The notebooks of a checkout, Jupyter's checkpoint copies left out."""
    return [f for f in python_files(folder, (".ipynb",)) if ".ipynb_checkpoints" not in f.parts]


def _another_name(folder: Path, files: list[Path], function: str) -> str:
    """What to say when no file defines the function: the one notebook that defines it (the
    --submission-file to pass), the one module-level function that looks like attention under
    another name (the --function to pass), or a class that has it as a method (which --function
    cannot grade). Parsed within the checkout's budget."""
    notebooks = [n for n in _notebooks(folder) if _names(n, f"def {function}(")]
    if len(notebooks) == 1:
        where = notebooks[0].relative_to(folder).as_posix()
        return f"; the notebook {where} defines {function}(): choose it with --submission-file {where}"
    functions: dict[str, Path] = {}
    methods: list[str] = []
    budget = MAX_PARSED_PER_CHECKOUT
    for f in files:
        try:
            size = f.stat().st_size
            budget -= size
            if budget < 0 or size > MAX_PARSED_BYTES:
                break
            tree = parse_quietly(read_regular(f, MAX_PARSED_BYTES), filename=str(f))
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, f)
            elif isinstance(node, ast.ClassDef) and len(node.name) < NAME_LIMIT and any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == function for m in node.body):
                methods.append(f"{node.name}.{function} in {f.relative_to(folder).as_posix()}")
    other = attention_candidate(functions)
    if other is not None:
        return f"; {functions[other].relative_to(folder).as_posix()} defines {other}(): grade it with --function {other}"
    if methods:
        return f"; {methods[0]} is a method, and the graded function must be at module level (a function of the file that calls it)"
    return ""


def discover(paths: list[Path], rule: Rule, candidate: bool = False) -> list[Submission]:
    """Everything to grade in ``paths``, in order. Raises UsageError for a path that does not
    exist, is neither a folder nor a .py file, or (a folder) holds nothing to grade."""
    found: list[Submission] = []
    for path in paths:
        try:
            path.stat()
        except FileNotFoundError:
            raise UsageError(f"{path}: {'broken symbolic link' if path.is_symlink() else 'no such file or folder'}") from None
        except OSError as exc:  # a symbolic-link loop (ELOOP), a folder it may not enter, ...
            raise UsageError(f"{path}: {exc.strerror or exc}") from None
        if path.is_file():
            if path.suffix not in SUFFIXES:
                raise UsageError(f"{path}: not a Python file (.py) or notebook (.ipynb)")
            found.append(Submission(str(path), path))
        elif not path.is_dir():
            raise UsageError(f"{path}: not a file or folder")
        elif candidate:
            found.append(find_in_checkout(path, rule))
        else:
            inside = _folder_entries(path, rule)
            if not inside:
                raise UsageError(f"{path}: no submissions in this folder (no .py file, no candidate folder)")
            found.extend(inside)
    return _once(found)


def _once(found: list[Submission]) -> list[Submission]:
    """Each submission once, where it first came (a file given twice, or also inside a folder
    given): graded twice it would stand twice in the gradebook."""
    seen: set[str] = set()
    kept = []
    for sub in found:
        where = sub.folder if sub.file is None else sub.file
        key = os.path.realpath(where) if where is not None else sub.label
        if key not in seen:
            seen.add(key)
            kept.append(sub)
    return kept


def _folder_entries(folder: Path, rule: Rule) -> list[Submission]:
    real = folder.resolve()
    found = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot list the folder: {exc.strerror}") from None
    for entry in entries:
        path = Path(entry.path)
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError:
            continue
        if not (is_dir or is_file) or entry.name.startswith(".") or (is_dir and _skipped_dir(path)):
            continue
        if is_file and not entry.name.endswith(SUFFIXES):
            continue
        if entry.is_symlink():
            # Outside the folder, or to a neighbour's file or folder: either way not this
            # candidate's own work, and never followed.
            where = "outside the folder" if not _inside(path, real) else "another entry of the folder"
            found.append(Submission(str(path), None, error=f"a symbolic link to {where}; not followed"))
        elif is_file:
            found.append(Submission(str(path), path, loose=True))
        else:
            found.append(find_in_checkout(path, rule))
    return found
