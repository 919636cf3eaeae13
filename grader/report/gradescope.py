"""Gradescope's autograder ``results.json``: this grader as a Gradescope autograder.

Gradescope reads ``/autograder/results/results.json``: a total ``score``, ``execution_time`` in
seconds, an ``output`` shown with the whole submission, and ``tests``, one per check, each with
``name``, ``score``, ``max_score``, ``status`` (``passed`` or ``failed``) and ``output``. The
diagnoses that explain a failed check go into that test's output, with the fix. Gradescope grades
one submission per run; given several, every test name starts with the submission's path and the
score is the sum.

Names and outputs are shown to students and staff in a browser: their control characters (bidi
overrides included) are escaped, and a newline in a message or a file name is shown as ``\\n``,
so it adds no line (``untrusted.line``). The document on stdout has
no workflow command in it (``untrusted.json_document``).
"""

from __future__ import annotations

import json
from typing import Any

from grader.report import untrusted
from grader.report.base import DocumentReporter
from grader.report.junit import explanation
from grader.report.model import Report


def tests_of(report: Report, prefix: str) -> list[dict[str, Any]]:
    tests = []
    if report.error is not None:
        tests.append({"name": untrusted.line(f"{prefix}grade"), "score": 0.0, "max_score": report.max_score, "status": "failed", "output": untrusted.line(report.error)})
    for check in report.checks:
        owned = [explanation(d) for d in report.diagnoses if check.id in d.checks]
        tests.append({
            "name": untrusted.line(f"{prefix}{check.id}: {check.title}"),
            "score": check.points,
            "max_score": check.max_points,
            "status": "passed" if check.passed else "failed",
            "output": "\n\n".join([untrusted.line(check.summary), *owned]),  # explanation: line by line
        })
    return tests


def results_document(reports: list[Report]) -> dict[str, Any]:
    several = len(reports) > 1
    tests: list[dict[str, Any]] = []
    lines = []
    for report in reports:
        tests.extend(tests_of(report, f"{report.path}: " if several else ""))
        verdict = "passed" if report.passed else "failed"
        names = ", ".join(f"{d.code} {d.name}" for d in report.diagnoses)
        lines.append(untrusted.line(f"{report.path}: {verdict}, {report.score:g}/{report.max_score:g}" + (f"; {names}" if names else "")))
    return {
        "score": sum(r.score for r in reports),
        "execution_time": round(sum(r.duration_s for r in reports), 3),
        "output": "\n".join(lines),
        "tests": tests,
    }


class GradescopeReporter(DocumentReporter):
    def finish(self) -> None:
        self.stream.write(untrusted.json_document(json.dumps(results_document(self.reports), indent=2, ensure_ascii=True)))
        self.stream.write("\n")
