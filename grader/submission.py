"""One submission as the worker will run it: a file, a notebook or a repository's entry file,
its framework, and how it is loaded.

Everything here reads files as data (JSON, syntax trees); nothing of the submission runs in the
grader. A submission that cannot even be prepared (a broken notebook, a framework that is not
installed, a missing entry file) gets a :class:`Unloadable`, which the API reports as that
submission's ``load-error`` without starting a worker.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.entry import LoadPlan, load_plan
from grader.frameworks import Framework, FrameworkChoiceError, choose, frameworks_of, imported_modules, installed, missing_message, parse_source, statements
from grader.fsutil import read_regular
from grader.notebook import NotebookError, NotebookSource, read_notebook

MAX_HELPER_FILES = 20
MAX_HELPER_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Submission:
    """A submission read as data: its file, framework and how the worker loads it."""

    file: Path  # the .py file or notebook that runs
    framework: Framework
    plan: LoadPlan
    notebook: NotebookSource | None = None

    def request(self) -> dict[str, Any]:
        """What the worker needs beyond the probes (see grader.sandbox.worker.load_function)."""
        plan: dict[str, Any] = self.plan.as_request()
        if self.notebook is not None:
            plan["source"] = self.notebook.source
            plan["module"] = None
        return {"framework": self.framework, "plan": plan}


@dataclass(frozen=True)
class Unloadable:
    """Why this submission cannot be run at all, as an exception type and a one-line message."""

    error_type: str
    message: str


def _parse(text: str) -> ast.Module | None:
    try:
        return parse_source(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _helper_files(module: str, level: int, here: Path, plan: LoadPlan) -> list[Path]:
    """Files of the candidate that an import statement may load (never anything outside it).
    Not importlib.util.find_spec: for a dotted name it imports the parent packages, which would
    run the candidate's code in the grader."""
    bases = [here] if level else list(plan.sys_path)
    found = []
    parts = module.split(".") if module else []
    for base in bases:
        for n in range(len(parts), 0, -1):
            stem = base.joinpath(*parts[:n])
            for path in (stem.with_suffix(".py"), stem / "__init__.py"):
                if path.is_file() and path.resolve().is_relative_to(plan.root):
                    found.append(path)
    return found


def framework_sources(file: Path, first: str, plan: LoadPlan, follow: bool = True) -> set[Framework]:
    """The frameworks imported by the submission and by its own helper modules (followed through
    the candidate's files only, a bounded number of them; with ``follow=False``, the file's own)."""
    found: set[Framework] = set()
    queue: deque[tuple[Path, str]] = deque([(file, first)])
    seen = {file.resolve()}
    while queue:
        path, text = queue.popleft()
        tree = _parse(text)
        if tree is None:
            continue
        found |= frameworks_of(imported_modules(tree))
        for node in statements(tree) if follow else ():
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
                targets = [p for n in names for p in _helper_files(n, node.level, path.parent, plan)]
            elif isinstance(node, ast.Import):
                targets = [p for a in node.names for p in _helper_files(a.name, 0, path.parent, plan)]
            else:
                continue
            for target in targets:
                if target.resolve() in seen or len(seen) >= MAX_HELPER_FILES:
                    continue
                seen.add(target.resolve())
                try:
                    data = read_regular(target, MAX_HELPER_BYTES)
                except OSError:
                    continue
                if len(data) <= MAX_HELPER_BYTES:
                    queue.append((target, data.decode("utf-8", errors="replace")))
    return found


def prepare_submission(file: Path, framework_setting: str = "auto", root: Path | None = None, *, alone: bool = False) -> Submission | Unloadable:
    """Read ``file`` (a .py file or a notebook) as data and decide how the worker runs it.
    ``alone``: a loose file of a batch folder, whose worker may read the file and nothing beside
    it; its framework then comes from its own imports only, never from a neighbour's file that
    happens to have the name of one of them (which another candidate may have put there)."""
    plan = load_plan(file, root)
    notebook = None
    if file.suffix == ".ipynb":
        try:
            notebook = read_notebook(file)
        except NotebookError as exc:
            return Unloadable("NotebookError", str(exc))
        text = notebook.source
    else:
        try:
            text = read_regular(file, 4 * MAX_HELPER_BYTES)[: 4 * MAX_HELPER_BYTES].decode("utf-8", errors="replace")
        except OSError as exc:
            return Unloadable("OSError", f"cannot read the file: {exc.strerror}")
    try:
        framework = choose(framework_setting, framework_sources(file, text, plan, follow=not alone) if framework_setting == "auto" else set())
    except FrameworkChoiceError as exc:
        return Unloadable("FrameworkChoiceError", str(exc))
    if not installed(framework):
        return Unloadable("ModuleNotFoundError", missing_message(framework))
    return Submission(file=file, framework=framework, plan=plan, notebook=notebook)
