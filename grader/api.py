"""The library's public face: grade submissions against a suite, one Report each.

The CLI is a thin layer over the same pipeline (grader.pipeline); from Python::

    from grader.api import grade, Options
    for report in grade([Path("submission.py")]):
        print(report.path, report.passed, [d.name for d in report.diagnoses])

or, to grade many files against one prepared suite::

    prepared = prepare(suite, Options(timeout_s=5))
    report = grade_file(Path("submission.py"), prepared)
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from grader.discover import Rule, discover
from grader.pipeline import grade_file, run
from grader.prepare import Options, Prepared, prepare
from grader.report.model import Report
from grader.suite import Suite

__all__ = ["Options", "Prepared", "grade", "grade_file", "prepare"]


def grade(paths: list[Path], suite: Suite | None = None, options: Options | None = None) -> Iterator[Report]:
    """Grade every submission in ``paths`` (files, folders of them, checkouts: the rules of
    grader.discover), one Report each, in order, one after another. Raises SuiteError or
    ReferenceDataError when the suite or its references are bad and UsageError when a path is,
    before grading anything."""
    prepared = prepare(suite, options)
    submissions = discover(paths, Rule(function=prepared.function, entry=prepared.suite.entry))
    for _, report in run(submissions, prepared):
        yield report
