"""The library's public face: grade submissions against a suite, one Report each.

The CLI is a thin layer over the same pipeline (grader.pipeline); from Python::

    from grader import grade

    for report in grade("submission.py"):
        print(report.passed, report.score, [d.name for d in report.diagnoses])

``grade`` takes a path (``str`` or ``pathlib.Path``) or a list of them, and optionally a suite
(a ``Suite`` or the path of a suite YAML file) and ``Options``. Everything is checked when it is
called, before anything is graded: bad input raises one of the grader's own errors
(grader.errors), never a TypeError or AttributeError from inside.

To grade many files against one prepared suite::

    prepared = prepare(suite, Options(timeout_s=5))
    report = grade_file(Path("submission.py"), prepared)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Iterator, Union

from grader.bounds import MEMORY_MB, TIMEOUT_S, function_name_problem
from grader.discover import Rule, discover
from grader.errors import UsageError
from grader.pipeline import grade_file, run
from grader.prepare import Options, Prepared, prepare
from grader.report.model import Report
from grader.suite import Suite, load_suite

__all__ = ["Options", "Prepared", "Report", "grade", "grade_file", "prepare"]

PathLike = Union[str, "os.PathLike[str]"]
FRAMEWORKS = ("auto", "numpy", "torch", "jax")


def grade(paths: PathLike | Iterable[PathLike], suite: Suite | PathLike | None = None, options: Options | None = None, *, candidate: bool = False) -> Iterator[Report]:
    """Grade every submission in ``paths`` (files, notebooks, folders of them, candidates'
    checkouts: the rules of grader.discover; with ``candidate``, each path is one candidate's
    checkout), one Report each, in order, one after another.

    ``suite`` is a Suite, the path of a suite YAML file, or None for the built-in suite.

    Raises, before grading anything: UsageError for a path that is missing or not a
    submission, or an argument of the wrong kind; SuiteError for a suite file that is missing
    or invalid; ReferenceDataError when the suite's stored references are missing or corrupt.
    All three are GraderError (grader.errors)."""
    wanted = _paths(paths)
    chosen = _suite(suite)
    _check_options(options)
    if not isinstance(candidate, bool):
        raise UsageError(f"candidate: expected True or False, got {type(candidate).__name__}")
    prepared = prepare(chosen, options)
    submissions = discover(wanted, Rule(function=prepared.function, entry=prepared.suite.entry), candidate=candidate)
    return _reports(run(submissions, prepared))


def _reports(results: Iterator[tuple[int, Report]]) -> Iterator[Report]:
    for _, report in results:
        yield report


def _paths(paths: object) -> list[Path]:
    """``paths`` as a list of Paths: one path, or an iterable of them (not a string of names)."""
    if _is_path(paths):
        return [Path(paths)]  # type: ignore[arg-type]
    if isinstance(paths, (bytes, bytearray)) or not isinstance(paths, Iterable):
        raise UsageError(f"paths: expected a path (str or pathlib.Path) or a list of them, got {type(paths).__name__}")
    found = list(paths)
    for item in found:
        if not _is_path(item):
            raise UsageError(f"paths: expected str or pathlib.Path items, got {type(item).__name__}")
    if not found:
        raise UsageError("paths: no submission given")
    return [Path(item) for item in found]


def _is_path(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, os.PathLike) and isinstance(os.fspath(value), str))


def _suite(suite: object) -> Suite | None:
    if suite is None or isinstance(suite, Suite):
        return suite
    if _is_path(suite):
        return load_suite(Path(suite))  # type: ignore[arg-type]
    raise UsageError(f"suite: expected a Suite or the path of a suite file, got {type(suite).__name__}")


def _check_options(options: object) -> None:
    """The limits the command line's options have, for the same settings given in Python."""
    if options is None:
        return
    if not isinstance(options, Options):
        raise UsageError(f"options: expected grader.Options, got {type(options).__name__}")
    given = {f.name: getattr(options, f.name) for f in fields(options)}
    function = given["function"]
    if function is not None and not isinstance(function, str):
        raise UsageError(f"options.function: expected a Python name, got {type(function).__name__}")
    if function is not None and (problem := function_name_problem(function)):
        raise UsageError(f"options.function: {problem}")
    timeout = given["timeout_s"]
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise UsageError(f"options.timeout_s: expected a number of seconds, got {type(timeout).__name__}")
    if timeout is not None and (problem := TIMEOUT_S.problem(timeout)):
        raise UsageError(f"options.timeout_s: {problem}")
    memory = given["memory_mb"]
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int)):
        raise UsageError(f"options.memory_mb: expected a whole number of megabytes, got {type(memory).__name__}")
    if memory is not None and (problem := MEMORY_MB.problem(memory)):
        raise UsageError(f"options.memory_mb: {problem}")
    if not isinstance(given["strict_sandbox"], bool):
        raise UsageError(f"options.strict_sandbox: expected True or False, got {given['strict_sandbox']!r}")
    framework = given["framework"]
    if framework is not None and framework not in FRAMEWORKS:
        raise UsageError(f"options.framework: expected one of {', '.join(FRAMEWORKS)}, got {framework!r}")
