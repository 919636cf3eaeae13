"""Loading the forms a submission takes, in the worker: a notebook's joined source, a file
inside a candidate's package, and the arguments of the call (a mask by keyword or fourth).

Runs in the worker, next to the submission; the grader decides what to ask for
(grader/submission.py, grader/entry.py, grader/notebook.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import linecache
import os
import sys
import types
from typing import Any


def import_submission(path: str, plan: dict[str, Any]) -> types.ModuleType:
    """Run the submission's code as a module. Besides a plain file, the grader may ask for
    (see grader/notebook.py and grader/entry.py):
    * ``source``: a notebook's code cells joined into one text, run under the notebook's name;
    * ``module``: a file inside a package of a repository, imported by its dotted name so that
      its relative imports work."""
    source = plan.get("source")
    if isinstance(source, str):
        module = types.ModuleType("submission")
        module.__file__ = path
        # A notebook kernel gives every notebook display() without an import; a cell that
        # imports its own (from IPython.display) replaces this one.
        module.__dict__["display"] = _display
        sys.modules["submission"] = module
        # Tracebacks read code lines through linecache: give them the cells, not the JSON.
        linecache.cache[path] = (len(source), None, source.splitlines(True), path)
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - this is the sandbox
        return module
    dotted = plan.get("module")
    if isinstance(dotted, str) and dotted:
        return importlib.import_module(dotted)
    spec = importlib.util.spec_from_file_location("submission", path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot import this file")
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module


def _display(*objs: Any, **kwargs: Any) -> None:
    """IPython's display(), as a script shows it: each object's repr, printed."""
    for obj in objs:
        print(repr(obj))


def search_path(path: str, plan: dict[str, Any]) -> list[str]:
    """The folders put first on sys.path; a package name that is already taken (numpy, grader, a
    standard module) is never imported from the candidate: the file is then loaded on its own."""
    dotted = plan.get("module")
    if isinstance(dotted, str) and dotted:
        top = dotted.split(".")[0]
        try:
            taken = top in sys.modules or importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            taken = True
        if taken:
            plan["module"] = None
    folders = plan.get("sys_path")
    if isinstance(folders, list) and all(isinstance(f, str) for f in folders) and folders:
        return list(folders)
    return [os.path.dirname(os.path.abspath(path))]


# Parameter names under which a mask is passed by keyword; otherwise it goes fourth.
MASK_NAMES = ("mask", "attn_mask", "attention_mask")


def call_arguments(info: dict[str, Any], Q: Any, K: Any, V: Any, mask: Any, has_mask: bool) -> tuple[list[Any], dict[str, Any]]:
    """Positional Q, K, V (names are never assumed); a mask by keyword when a parameter is named
    like one, else fourth; None for a required mask when the probe has none."""
    if not has_mask and not info.get("mask_required"):
        return [Q, K, V], {}
    if info.get("mask_keyword"):
        return [Q, K, V], {info["mask_keyword"]: mask}
    return [Q, K, V, mask], {}
