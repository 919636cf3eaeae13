"""A Markdown summary, fit for a pull request comment or a CI job summary
(``$GITHUB_STEP_SUMMARY``): the verdict counts, one table row per submission, and for the failed
ones what was found and the fix.

Paths and messages may come from a candidate, so every piece of text is escaped: control
characters are shown as escapes (grader.report.untrusted), Markdown punctuation and ``<`` get a
backslash (no link, no emphasis, no raw HTML, no ``##[`` a CI runner would read), ``&`` becomes
``&amp;`` and a line break a space, so no cell can break the table and no text starts a line.
GitHub links a bare URL, ``www.`` address or e-mail address and notifies an ``@mention`` with no
markup at all, so a zero-width space (``&#8203;``, invisible when rendered) goes after each
``@`` and inside each ``://`` and ``www.``. A fix is shown as a code span, where GitHub links
and mentions nothing.

The reporter keeps a Row per submission and the few lines the details show, never a Report, and
shows what the run's audience may see (grader.report.audience).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import IO, Iterable

from grader.report import untrusted
from grader.report.audience import shown_to
from grader.report.base import RunInfo
from grader.report.fixtext import is_code
from grader.report.model import Report
from grader.report.summary import Row, RunSummary

MAX_ROWS = 1000
MAX_DETAILS = 50
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#|~])")
_AUTOLINK = re.compile(r"(@|:(?=//)|\b[wW]{3}(?=\.))")


def md(text: str) -> str:
    text = " ".join(untrusted.lines(text).replace("&", "&amp;").split())
    return _AUTOLINK.sub(r"\1&#8203;", _SPECIAL.sub(r"\\\1", text))


def md_code(text: str) -> str:
    """``text`` as an inline code span (the fix is code): nothing in it is markup or HTML. The
    fence is one backtick longer than any run of backticks inside, as CommonMark allows."""
    text = untrusted.no_commands(" ".join(untrusted.lines(text).split()))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fix(fix: str) -> str:
    """A fix: a code span if it is a line of code, else a sentence with its backticked parts as
    code spans (an odd number of backticks: the sentence as it is, escaped)."""
    if is_code(fix):
        return md_code(fix)
    parts = fix.split("`")
    if len(parts) % 2 == 0:
        return md(fix)
    return " ".join(md_code(part) if i % 2 else md(part) for i, part in enumerate(parts) if part.strip())


@dataclass(frozen=True, slots=True)
class Finding:
    """One diagnosis as the details section shows it."""

    code: str
    name: str
    where: str | None  # grader.diagnosis.model.Location.where
    message: str
    fix: str


@dataclass(frozen=True, slots=True)
class Details:
    """What the details section shows of one failed submission: a few lines, not the Report."""

    path: str
    error: str | None
    findings: tuple[Finding, ...]

    @classmethod
    def of(cls, report: Report) -> Details:
        findings = tuple(Finding(d.code, d.name, d.location.where if d.location is not None else None, d.message, d.fix) for d in report.diagnoses)
        return cls(report.path, report.error, findings)


def document(rows: list[Row], details: list[Details], interrupted: str = "") -> str:
    """The summary: counts, a table row per submission (the first MAX_ROWS), the details of the
    failed ones (the first MAX_DETAILS); ``interrupted``: what RunInfo.interrupted says."""
    summary = RunSummary.of(rows)
    lines = [f"## Attention grader: {summary.passed} of {summary.total} passed", ""]
    counts = f"{summary.passed} passed, {summary.failed} failed"
    if summary.errors:
        counts += f", {summary.errors} not graded"
    if summary.cached:
        counts += f" ({summary.cached} from the cache)"
    if interrupted:
        counts += f"; **{interrupted}**"
    lines += [counts, "", "| | submission | score | diagnoses | seconds |", "|---|---|---:|---|---:|"]
    for r in rows[:MAX_ROWS]:
        mark = "✅" if r.passed else ("⚠️ not graded" if r.verdict == "not graded" else "❌")
        found = ", ".join(f"{code} {name}" for code, name in r.diagnoses) or (r.error or "")
        lines.append(f"| {mark} | {md(r.path)} | {r.score:g}/{r.max_score:g} | {md(found)} | {r.duration_s:.2f} |")
    if len(rows) > MAX_ROWS:
        lines.append(f"| | and {len(rows) - MAX_ROWS} more | | | |")
    if summary.diagnoses:
        lines += ["", "**Most frequent diagnoses:** " + ", ".join(f"{md(code)} {md(name)} ({n})" for code, name, n in summary.diagnoses)]
    for item in details[:MAX_DETAILS]:
        lines += ["", f"### {md(item.path)}", ""]
        if item.error:
            lines.append(f"- not graded: {md(item.error)}")
        for f in item.findings:
            where = f" ({md(f.where)})" if f.where is not None else ""
            lines.append(f"- **{md(f.code)} {md(f.name)}**{where}: {md(f.message.rstrip('.'))}. Fix: {md_fix(f.fix)}")
    return "\n".join(lines) + "\n"


def render(reports: Iterable[Report], info: RunInfo) -> str:
    """The summary of ``reports`` as ``info.audience`` may see them."""
    reporter = MarkdownReporter(io.StringIO(), info)
    for report in reports:
        reporter.add(report)
    return reporter.text()


class MarkdownReporter:
    """Keeps a Row per submission and the details of the first MAX_DETAILS failed ones, as the
    run's audience may see them (grader.report.audience); writes the summary in ``finish``."""

    streaming = False

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.rows: list[Row] = []
        self.details: list[Details] = []

    def add(self, report: Report) -> None:
        report = shown_to(report, self.info.audience)
        row = Row.of(report)
        self.rows.append(row)
        if not row.passed and len(self.details) < MAX_DETAILS:
            self.details.append(Details.of(report))

    def text(self) -> str:
        return document(self.rows, self.details, self.info.interrupted(len(self.rows)))

    def finish(self) -> None:
        self.stream.write(self.text())
