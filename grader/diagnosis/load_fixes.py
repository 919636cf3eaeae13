"""Fixes of a load error that depend on where the graded file sits, which the engine, judging
observations only, does not know.

* A file found in a folder of submissions is graded on its own: its worker sees no other file of
  the folder (another candidate's, maybe). A helper module beside it is then "not found", and
  the fix says how to grade the two together.
* A module of a package (``from .utils import softmax``) graded as a file of its own has no
  package to import from: it is graded with its repository, as a checkout.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from grader.diagnosis.model import Diagnosis

RELATIVE_IMPORT = "attempted relative import"


def _beside(path: Path, module: str) -> bool:
    try:
        return (path.parent / f"{module}.py").is_file() or (path.parent / module / "__init__.py").is_file()
    except OSError:
        return False


def placed(diagnoses: list[Diagnosis], path: Path, alone: bool, checkout: bool) -> list[Diagnosis]:
    """The diagnoses, a load error's fix said for where ``path`` sits: ``alone`` for a file of a
    folder of submissions, ``checkout`` for a file of a candidate's checkout."""
    return [_placed(d, path, alone, checkout) if d.name == "load-error" else d for d in diagnoses]


def _placed(d: Diagnosis, path: Path, alone: bool, checkout: bool) -> Diagnosis:
    module = d.evidence.get("module")
    if alone and isinstance(module, str) and _beside(path, module):
        return replace(d, fix=(
            f"`{module}` is beside the file, but each file found in a folder of submissions is graded on its own, "
            "seeing no other file of the folder. Grade this candidate's folder as one checkout "
            "(`grade --candidate FOLDER`), or the file by name (`grade FILE`: its folder is then its own)."
        ))
    if not checkout and RELATIVE_IMPORT in str(d.evidence.get("message", "")):
        return replace(d, fix=(
            "The file is a module of a package (it imports with a leading dot, from .x import y): "
            "grade the repository it belongs to with `grade --candidate ROOT`, which imports it as package.module."
        ))
    return d
