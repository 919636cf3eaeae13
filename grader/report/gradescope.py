"""Gradescope's autograder ``results.json``: this grader as a Gradescope autograder.

Gradescope runs the autograder once per submission and reads ``/autograder/results/results.json``:
a total ``score``, ``execution_time`` in seconds, an ``output`` shown with the whole submission,
``stdout_visibility`` (who sees what the autograder printed), and ``tests``, one per check, each
with ``name``, ``score``, ``max_score``, ``status`` (``passed`` or ``failed``), ``output`` and
``visibility``. The diagnoses that explain a failed check go into that test's output, with the
fix. The document describes exactly one submission: given several, the reporter refuses
(``UsageError``; the CLI refuses before grading), rather than add up different candidates.

Who reads it follows the run's audience (grader.report.audience):

- ``candidate`` (a course's students): every test is ``visible`` and holds only what a candidate
  may see (the named bugs in plain words, their line and fix, pass/fail per check; no expected
  value, stored case or fresh input), and so is the grader's stdout under the same audience:
  ``stdout_visibility`` is ``visible``.
- ``reviewer`` (the default): the tests as before (Gradescope's default visibility) with every
  figure; the grader's stdout, the reviewer's report, stays ``hidden`` from students.

Names and outputs are shown to students and staff in a browser: their control characters (bidi
overrides included) are escaped, and a newline in a message or a file name is shown as ``\\n``,
so it adds no line (``untrusted.line``). The document on stdout has no workflow command in it
(``untrusted.json_document``).
"""

from __future__ import annotations

import json
from typing import IO, Any

from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.errors import UsageError
from grader.report import untrusted
from grader.report.audience import is_for_candidate, shown_to
from grader.report.base import RunInfo
from grader.report.junit import explanation
from grader.report.model import Report


def candidate_explanation(d: Diagnosis) -> str:
    """A diagnosis for its candidate, in labelled lines: the bug, what it is, where, why, the fix."""
    one = untrusted.line
    rule = BY_NAME.get(d.name)
    lines = [one(f"{d.code} {d.name}: {rule.title if rule is not None else d.severity}"), one(d.message)]
    if d.location is not None:
        where = f"cell {d.location.cell}, line {d.location.line}" if d.location.cell else f"line {d.location.line}"
        lines.append(one(f"Where: {d.location.file} {where}: {d.location.code.strip()}"))
    if rule is not None:
        lines.append(f"Why: {rule.why}")
    lines.append(f"Fix: {one(d.fix)}")
    return "\n".join(lines)


def tests_of(report: Report) -> list[dict[str, Any]]:
    candidate = is_for_candidate(report)
    explain = candidate_explanation if candidate else explanation
    visibility: dict[str, str] = {"visibility": "visible"} if candidate else {}
    tests = []
    if report.error is not None:
        tests.append({"name": "grade", "score": 0.0, "max_score": report.max_score, "status": "failed", "output": untrusted.line(report.error), **visibility})
    for check in report.checks:
        owned = [explain(d) for d in report.diagnoses if check.id in d.checks]
        tests.append({
            "name": untrusted.line(f"{check.id}: {check.title}"),
            "score": check.points,
            "max_score": check.max_points,
            "status": "passed" if check.passed else "failed",
            "output": "\n\n".join([untrusted.line(check.summary), *owned]),  # explanation: line by line
            **visibility,
        })
    return tests


def results_document(report: Report) -> dict[str, Any]:
    """The results.json of one graded submission."""
    verdict = "passed" if report.passed else "failed"
    names = ", ".join(f"{d.code} {d.name}" for d in report.diagnoses)
    return {
        "score": report.score,
        "execution_time": round(report.duration_s, 3),
        "output": untrusted.line(f"{report.path}: {verdict}, {report.score:g}/{report.max_score:g}" + (f"; {names}" if names else "")),
        "stdout_visibility": "visible" if is_for_candidate(report) else "hidden",
        "tests": tests_of(report),
    }


class GradescopeReporter:
    """Keeps the one report it may be given and writes its results.json in ``finish``."""

    streaming = False

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.report: Report | None = None
        self.count = 0

    def add(self, report: Report) -> None:
        self.count += 1
        if self.count > 1:
            raise UsageError(f"gradescope: results.json describes one submission, and {self.count} were given; grade each submission in its own run")
        self.report = shown_to(report, self.info.audience)

    def finish(self) -> None:
        # None graded (an interrupted run): a document still, as Gradescope expects one.
        document = results_document(self.report) if self.report is not None else {"score": 0.0, "output": "no submission was graded", "tests": []}
        text = json.dumps(document, indent=2, ensure_ascii=True)
        self.stream.write(untrusted.json_document(text))
        self.stream.write("\n")
