"""Attaching to each named mistake the line that most likely holds it.

A mistake found in the code's shape is located by its finder in grader.diagnosis.locate (the
syntax tree of the graded file). An exception is located where the worker saw it raised: a line
of the graded file, read here from the file the grader read itself, or a line of another of the
candidate's files, shown as the worker read it through the sandbox and never opened here. A
submission chooses the file names its exceptions carry (code compiled as ``.git/config``, as a
neighbour's file in a batch, or as a FIFO that would block a read), so the grader opening them
would read for the submission what its sandbox keeps from it. In a notebook the joined code
cells are searched, and a line is given as cell and line.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from grader.diagnosis import fixes
from grader.diagnosis.locate import FINDERS, MAX_LINE, Source, parse, read_source
from grader.diagnosis.model import Diagnosis, Location
from grader.notebook import NotebookSource


def attach_locations(path: Path, diagnoses: list[Diagnosis], function: str = "attention", notebook: NotebookSource | None = None, framework: str | None = None, root: Path | None = None) -> list[Diagnosis]:
    """The same diagnoses, each with the line that most likely holds it where one is found. In a
    notebook the joined code cells are read and each line is given as cell and line. The fixes are
    written in ``framework`` (the one the submission was graded in), or where it is not given in
    the framework the file imports. ``root``: the folder the worker ran the file in, to which the
    files of its exceptions are relative (the candidate's checkout, or the file's own folder)."""
    if not diagnoses:
        return diagnoses
    try:
        source = parse(path, function, notebook.source if notebook is not None else None)
    except (RecursionError, MemoryError):
        source = None
    if framework is None:
        framework = fixes.framework_of(source.tree if source is not None else None)  # fixes in its own words
    out = []
    for d in diagnoses:
        location = None
        try:
            if notebook is None:
                location = locate(d, source, path, root)
            elif d.name in ("crash", "load-error"):  # the worker's line, already made cell and line
                location = _cell_line(path, d, notebook)
            else:
                location = _in_cell(locate(d, source, path), notebook)
        except (RecursionError, MemoryError, ValueError, TypeError, AttributeError, IndexError, KeyError):
            location = None  # a strange tree gives no location, never an error
        d = fixes.in_framework(d, framework, source.inputs() if source is not None else None)
        out.append(replace(d, location=location) if location is not None else d)
    return out


def _cell_line(path: Path, d: Diagnosis, notebook: NotebookSource) -> Location | None:
    """The cell and line an exception came from (grader.notebook.remap_run put them in the
    evidence), with the code written there."""
    cell, line = d.evidence.get("cell"), d.evidence.get("line")
    if not isinstance(cell, int) or not isinstance(line, int):
        return None
    try:
        joined = notebook.line_map.index((cell, line))
    except ValueError:
        return None
    code = notebook.source.splitlines()[joined].strip()[:MAX_LINE]
    return Location(file=str(path), line=line, code=code, cell=cell)


def _in_cell(location: Location | None, notebook: NotebookSource) -> Location | None:
    if location is None:
        return None
    cell, line = notebook.locate(location.line)
    return replace(location, line=line, cell=cell) if cell is not None and line is not None else None


def locate(d: Diagnosis, source: Source | None, path: Path, root: Path | None = None) -> Location | None:
    line = d.evidence.get("line")
    if d.name in ("crash", "load-error") or (d.name == "hardcoded" and d.evidence.get("exception")):
        # Where the worker saw it raised, relative to the folder it ran in: another file's line
        # as the worker read it (see the module's docstring: never opened here).
        file = d.evidence.get("file")
        if isinstance(file, str) and root is not None and isinstance(line, int):
            there = (root / file).resolve()
            if there != path.resolve():
                if not there.is_relative_to(root.resolve()) or line < 1:
                    return None
                code = d.evidence.get("code")
                return Location(file=_as_given(there, path), line=line, code=code.strip()[:MAX_LINE] if isinstance(code, str) else "", observed=True)
        return _line_location(path, source, line) if isinstance(line, int) else None
    if source is None:
        return None
    finder = FINDERS.get(d.name)
    if finder is None:
        return None
    node = finder(source, d)
    return source.location(node) if node is not None else None


def _as_given(there: Path, path: Path) -> str:
    """``there`` (resolved) written the way the graded file's ``path`` was given: relative when
    it is relative, so a helper module reads ``src/pkg/ops.py`` beside ``src/pkg/attention.py``."""
    if path.is_absolute():
        return str(there)
    return os.path.normpath(path.parent / os.path.relpath(there, path.resolve().parent))


def _line_location(path: Path, source: Source | None, line: int) -> Location | None:
    if source is not None:
        lines = source.lines
    else:
        text = read_source(path)
        if text is None:
            return None
        lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    return Location(file=str(path), line=line, code=lines[line - 1].strip()[:MAX_LINE])
