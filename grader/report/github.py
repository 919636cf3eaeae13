"""GitHub Actions workflow commands: one annotation per diagnosis, at the line it points to.

``::error file=PATH,line=N,title=TITLE::MESSAGE`` (``::warning`` for a warning). The title is the
bug in words (the rule's title: "Scores divided by d_k instead of sqrt(d_k)"); the message reads
most important first, one line each: the plain sentence, the fix in the submission's own
framework, the line of code, the measured figures, and the code and name to explain it with::

    The scores are divided by d_k instead of sqrt(d_k), so the softmax rows come out nearly flat.
    Fix: scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    Code: line 12: scores = q @ k.T / q.shape[-1]
    Measured: effective scale 0.01563 where 1/sqrt(d_k) = 0.125 ...
    S201 scale-by-dk: grade explain S201

Without a location the annotation names the file only; in a notebook it names the cell in the
message, since a cell's line is no line of the ``.ipynb`` file.

Escaping follows the runner's rules: in the message ``%``, ``\\r`` and ``\\n`` become ``%25``,
``%0D`` and ``%0A``; in a property value ``:`` and ``,`` are escaped too (``%3A``, ``%2C``), since
they separate properties. Before that, what came from a submission is made inert
(grader.report.untrusted): its control characters are shown as escapes, each piece on one line
(the message's only line breaks, as ``%0A``, are the ones between its parts above), and no
``##[`` or ``::`` is left in it, so every line written is exactly one command of ours.

The action (``action.yml``) also gives its step's outputs: ``python -m grader.report.github
REPORT.json EXIT_CODE`` prints them as ``name=value`` lines for ``$GITHUB_OUTPUT``, read from the
JSON report of the run (see :func:`step_outputs`).
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import IO, Any, Mapping

from grader.diagnosis.fixes import in_framework
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.report import untrusted
from grader.report.audience import shown_to
from grader.report.base import RunInfo
from grader.report.model import Report


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _file_of(report: Report, d: Diagnosis | None) -> str:
    """The annotated file: the diagnosis' own file when it names one, else the submission. Both
    are paths as `grade` was given them (relative to the folder it ran in, which in a CI step is
    the repository's root, as GitHub wants them)."""
    if d is not None and d.location is not None and d.location.file:
        return os.path.normpath(d.location.file)
    return os.path.normpath(report.path)


def command(kind: str, properties: dict[str, str | int], message: str) -> str:
    props = ",".join(f"{key}={escape_property(_inert(str(value)))}" for key, value in properties.items())
    return f"::{kind} {props}::{escape_data(untrusted.no_commands(untrusted.lines(message)))}"


def _inert(text: str) -> str:
    return untrusted.no_commands(untrusted.line(text))


def title(d: Diagnosis) -> str:
    """The annotation's title: the bug in words, or its code and name for a rule unknown here
    (a report read back from an older cache)."""
    rule = BY_NAME.get(d.name)
    return rule.title if rule is not None else f"{d.code} {d.name}"


def message(d: Diagnosis, framework: str | None = None) -> str:
    """The annotation's text, one part a line, each part on one line whatever it holds."""
    rule = BY_NAME.get(d.name)
    fix = in_framework(d, framework).fix  # the fixes are numpy unless the file's imports said otherwise
    parts = [rule.summary if rule is not None else _inert(d.message), f"Fix: {_inert(fix)}"]
    if d.location is not None:
        parts.append(f"Code: {_inert(d.location.where)}: {_inert(d.location.code.strip())}")
    if rule is not None:
        # A candidate's copy of a report has the plain words for a message (grader.report.audience):
        # said once is enough.
        if d.message not in (rule.title, rule.summary):
            parts.append(f"Measured: {_inert(d.message)}")
        parts.append(f"{d.code} {d.name}: grade explain {d.code}")
    return "\n".join(parts)


def annotation_lines(report: Report) -> list[str]:
    lines = []
    if report.error is not None:
        lines.append(command("error", {"file": _file_of(report, None), "title": "Not graded"}, _inert(report.error)))
    framework = report.extra.get("framework")
    for d in report.diagnoses:
        props: dict[str, str | int] = {"file": _file_of(report, d)}
        if d.location is not None and not d.location.cell:
            props["line"] = d.location.line
        props["title"] = title(d)
        kind = "error" if d.severity == "error" else "warning"
        lines.append(command(kind, props, message(d, framework if isinstance(framework, str) else None)))
    return lines


class GithubReporter:
    streaming = True

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info

    def add(self, report: Report) -> None:
        for line in annotation_lines(shown_to(report, self.info.audience)):  # --audience candidate
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        pass


def step_outputs(document: Mapping[str, Any] | None, exit_code: int) -> dict[str, str]:
    """The action's outputs from the run's JSON report (None when grading did not get as far as
    writing one: a usage error, exit 2): ``passed`` (``true`` only when `grade` exited 0),
    ``score`` and ``max-score`` (summed over the submissions, empty without a report),
    ``exit-code``, and ``classroom-result``, the result GitHub Classroom's autograding reporter
    reads (base64 of its JSON: the score, the maximum, one test per check). Only numbers, words
    of ours and base64 are written, so no value can hold a line break or a workflow command."""
    submissions = list(document.get("submissions", [])) if document is not None else []
    graded = bool(submissions)
    score = sum(float(s.get("score", 0.0)) for s in submissions)
    maximum = sum(float(s.get("max_score", 0.0)) for s in submissions)
    return {
        "passed": "true" if exit_code == 0 and graded else "false",
        "score": _number(score) if graded else "",
        "max-score": _number(maximum) if graded else "",
        "exit-code": str(exit_code),
        "classroom-result": base64.b64encode(json.dumps(classroom_result(submissions, exit_code)).encode()).decode("ascii"),
    }


def classroom_result(submissions: list[Mapping[str, Any]], exit_code: int) -> dict[str, Any]:
    """GitHub Classroom's runner result (version 1): the status, the maximum score and one test
    per check with its points and what it found; the message of a failed check names the bugs
    that explain it, in words, with their fixes. Messages are the reports' own text, made inert:
    the Classroom reporter prints them to the job's log."""
    tests = []
    for sub in submissions:
        prefix = f"{sub.get('path', '')}: " if len(submissions) > 1 else ""
        if sub.get("error"):
            tests.append({"name": _inert(f"{prefix}not graded"), "status": "error", "score": 0, "message": _inert(str(sub["error"]))})
        for check in sub.get("checks", []):
            passed = bool(check.get("passed"))
            found = [_bug_line(d) for d in sub.get("diagnoses", []) if check.get("id") in d.get("checks", [])]
            message = _clip("; ".join([*found, str(check.get("summary", ""))]))
            tests.append({
                "name": _inert(f"{prefix}{check.get('id', '')}: {check.get('title', '')}"),
                "status": "pass" if passed else "fail",
                "score": float(check.get("points", 0.0)),
                "message": _inert(message),
            })
    status = "pass" if exit_code == 0 and submissions else ("fail" if exit_code == 1 else "error")
    if not submissions:
        tests.append({"name": "grade", "status": "error", "score": 0, "message": f"grade exited {exit_code} before grading: its error is in the log above"})
    maximum = sum(float(s.get("max_score", 0.0)) for s in submissions)
    return {"version": 1, "status": status, "max_score": maximum, "tests": tests}


def _bug_line(d: Mapping[str, Any]) -> str:
    rule = BY_NAME.get(str(d.get("name", "")))
    what = rule.title if rule is not None else str(d.get("name", ""))
    return f"{what} (fix: {d.get('fix', '')})"


def _clip(text: str, limit: int = 600) -> str:
    """A test's message, bounded: the reporter reads the whole result from one environment
    variable, which Linux caps at 128 KiB."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: float) -> str:
    """12 for a whole number of points, 12.5 otherwise: what a later step compares or prints."""
    return str(int(value)) if value == int(value) else f"{value:.6g}"


def main(argv: list[str]) -> int:
    """``python -m grader.report.github REPORT.json EXIT_CODE``: the action's outputs on stdout."""
    if len(argv) != 2 or not argv[1].lstrip("-").isdigit():
        print("usage: python -m grader.report.github REPORT.json EXIT_CODE", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):  # not written: grade stopped before grading (its error is in the log)
        document = None
    for name, value in step_outputs(document if isinstance(document, dict) else None, int(argv[1])).items():
        print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
