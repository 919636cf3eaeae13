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
"""

from __future__ import annotations

import re
from typing import IO

from grader.report import untrusted
from grader.report.base import DocumentReporter, RunInfo
from grader.report.model import Report
from grader.report.summary import RunSummary

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


def render(reports: list[Report], info: RunInfo) -> str:
    summary = RunSummary.of(reports)
    lines = [f"## Attention grader: {summary.passed} of {summary.total} passed", ""]
    counts = f"{summary.passed} passed, {summary.failed} failed"
    if summary.errors:
        counts += f", {summary.errors} not graded"
    if summary.cached:
        counts += f" ({summary.cached} from the cache)"
    lines += [counts, "", "| | submission | score | diagnoses | seconds |", "|---|---|---:|---|---:|"]
    for r in reports[:MAX_ROWS]:
        mark = "✅" if r.passed else "❌"
        found = ", ".join(f"{d.code} {d.name}" for d in r.diagnoses) or (r.error or "")
        lines.append(f"| {mark} | {md(r.path)} | {r.score:g}/{r.max_score:g} | {md(found)} | {r.duration_s:.2f} |")
    if len(reports) > MAX_ROWS:
        lines.append(f"| | and {len(reports) - MAX_ROWS} more | | | |")
    if summary.diagnoses:
        lines += ["", "**Most frequent diagnoses:** " + ", ".join(f"{md(code)} {md(name)} ({n})" for code, name, n in summary.diagnoses)]
    failed = [r for r in reports if not r.passed][:MAX_DETAILS]
    for r in failed:
        lines += ["", f"### {md(r.path)}", ""]
        if r.error:
            lines.append(f"- not graded: {md(r.error)}")
        for d in r.diagnoses:
            where = f" (line {d.location.line})" if d.location is not None else ""
            lines.append(f"- **{md(d.code)} {md(d.name)}**{where}: {md(d.message)}. Fix: {md_code(d.fix)}")
    return "\n".join(lines) + "\n"


class MarkdownReporter(DocumentReporter):
    def finish(self) -> None:
        self.stream.write(render(self.reports, self.info))
