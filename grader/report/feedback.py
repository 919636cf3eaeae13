"""``--feedback DIR``: one Markdown file per submission, written for its candidate.

Each file says, most important first: the verdict and the score, each named bug in plain words
with its line and its fix, then the checks. By default it is the candidate's view
(``grader.report.audience``: no expected values, no stored inputs, no printed output); the CLI
gives the reviewer's view only when ``--audience reviewer`` is asked for explicitly.

The file is named after the candidate (``grader.report.summary.candidate_of``: a checkout's
folder name, a file's stem), made safe as a file name (:func:`safe_name`): a candidate chose that
name, so it could hold a path separator, start with dots or hold control characters. Two
candidates whose safe names are the same (``a/b`` and ``a_b``, or ``Alice`` and ``alice`` on a
file system that ignores case) get ``-2``, ``-3``, ... in the order they were given: no file
overwrites another of the same run. A file of an earlier run with the same name is replaced.

Files are written as each report arrives (a sink with ``add`` / ``finish``), each atomically
(grader.fsutil.write_output: a link's target is replaced, the link kept; a device is written
through). Text from a submission is escaped for Markdown with
``grader.report.markdown.md`` and ``md_code``; the rules' own texts (titles, explanations) are
the grader's, written to read as Markdown, and kept as they are.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.errors import OutputError
from grader.fsutil import write_output
from grader.report import untrusted
from grader.report.audience import Audience, is_for_candidate, shown_to
from grader.report.files import output_error
from grader.report.markdown import md, md_code
from grader.report.model import Report
from grader.report.summary import candidate_of

MAX_NAME = 100  # characters of a file name taken from the candidate's name
OUTPUT_LINES = 40
_UNSAFE = re.compile(r"[^\w.+@ -]")  # \w: letters and digits of any script, and _
MARKS = {"passed": "✅", "failed": "❌", "skipped": "⏭️", "error": "⚠️"}


def prepare_folder(folder: Path) -> None:
    """Make ``folder`` if it is missing and make sure a file can be written in it, before any
    grading. Raises OutputError."""
    where = f"--feedback {folder}"
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{where}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".grade-feedback.", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{where}: cannot write in the folder: {exc.strerror or exc}") from None


def safe_name(candidate: str) -> str:
    """``candidate`` as a file name: every character but letters, digits and ``._+@ -`` becomes
    ``_`` (path separators, control characters, quotes, ...), no leading dot or space (no hidden
    file, no ``..``), at most MAX_NAME characters; ``submission`` if nothing is left."""
    name = _UNSAFE.sub("_", untrusted.line(candidate).replace("\\", "_"))
    name = name.lstrip(". ")[:MAX_NAME].rstrip(". ")
    return name or "submission"


def _ours(text: str) -> str:
    """A text of the grader's own (a rule's title, summary, why): written to read as Markdown,
    with its `code` spans, so it is kept as it is, on one line."""
    return " ".join(text.split())


def _bug(number: int, d: Diagnosis, reviewer: bool) -> list[str]:
    rule = BY_NAME.get(d.name)
    title = _ours(rule.title) if rule is not None else md(d.name)
    warning = " (a warning)" if d.severity == "warning" else ""
    lines = [f"### {number}. {title}{warning}", ""]
    if rule is not None:
        lines += [_ours(rule.summary), ""]
    if d.location is not None:
        place = f"cell {d.location.cell}, line {d.location.line}" if d.location.cell else f"line {d.location.line}"
        lines.append(f"- **Where:** {md_code(d.location.file)}, {place}: {md_code(d.location.code)}")
    lines.append(f"- **Fix:** {md_code(d.fix)}")
    if reviewer and (rule is None or d.message != rule.title):
        lines.append(f"- **Measured:** {md(d.message)}")
    if rule is not None:
        lines.append(f"- **Why it matters:** {_ours(rule.why)}")
    lines.append(f"- **Diagnosis:** {md(d.code)} {md(d.name)}")
    return [*lines, ""]


def _fenced(text: str) -> list[str]:
    """Printed output as a fenced block: a fence longer than any run of backticks in it, so no
    line of the output can close the block; nothing in a fenced block is markup."""
    text = untrusted.no_commands(untrusted.lines(text))
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", *lines[:OUTPUT_LINES], fence]


def render_feedback(report: Report) -> str:
    """The feedback file of one report (already filtered for its audience)."""
    reviewer = not is_for_candidate(report)
    verdict = "Passed" if report.passed else ("Not graded" if report.error is not None else "Failed")
    lines = [
        f"# Feedback for {md(candidate_of(report))}",
        "",
        f"**{verdict}:** {report.score:g} of {report.max_score:g} points.",
        "",
        f"Graded: {md_code(report.path)} (suite {md(report.suite)}).",
        "",
    ]
    if report.error:
        lines += [f"This submission could not be graded: {md(report.error)}", ""]
    named = (*report.errors, *report.warnings)
    if named:
        lines += ["## What to fix", ""]
        for number, d in enumerate(named, start=1):
            lines += _bug(number, d, reviewer)
    elif report.passed:
        lines += ["Every check passed: nothing to fix.", ""]
    if report.checks:
        passed = sum(c.passed for c in report.checks)
        lines += ["## Checks", "", f"{passed} of {len(report.checks)} checks passed.", ""]
        lines += ["| | check | points | what was found |", "|---|---|---:|---|"]
        for c in report.checks:
            lines.append(f"| {MARKS.get(c.outcome, '')} {c.outcome} | {md(c.id)}: {md(c.title)} | {c.points:g}/{c.max_points:g} | {md(c.summary)} |")
        lines.append("")
    out = report.output
    if reviewer and out.total_bytes:
        cut = f"; the first {OUTPUT_LINES} lines" if out.truncated_bytes or out.text.count("\n") > OUTPUT_LINES else ""
        lines += ["## What it printed", "", f"{out.total_bytes} bytes{cut}:", "", *_fenced(out.text), ""]
    return "\n".join(lines)


class FeedbackWriter:
    """Writes each report's feedback file into ``folder`` as the report arrives."""

    streaming = False

    def __init__(self, folder: Path, audience: Audience = "candidate") -> None:
        self.folder = folder
        self.audience = audience
        self.taken: set[str] = set()  # file names of this run, case folded
        self.written = 0

    def name_for(self, candidate: str) -> str:
        """The file name of the next candidate so named: unique in this run, whatever the case."""
        base = safe_name(candidate)
        name, number = f"{base}.md", 1
        while name.casefold() in self.taken:
            number += 1
            name = f"{base}-{number}.md"
        self.taken.add(name.casefold())
        return name

    def add(self, report: Report) -> None:
        report = shown_to(report, self.audience)
        path = self.folder / self.name_for(candidate_of(report))
        try:
            write_output(path, render_feedback(report).encode("utf-8", errors="replace"))
        except OSError as exc:
            raise output_error(path, exc) from None
        self.written += 1

    def finish(self) -> None:
        """Nothing is left to write: every file was written when its report came."""
