"""The terminal report, rendered with rich.

Most important first. By default a report fits a screen: the verdict and score line; each named
bug (an error-severity diagnosis) in plain words (its rule's title) with the file and line, the
offending code and the fix, the heat map of the weights below the bug it supports; the other
diagnoses one line each; the failed checks one line each, with the bugs that explain them; the
passed and the skipped checks folded into a line each. With ``-v`` (``RunInfo.verbose``) every
figure follows: a panel per diagnosis (what was measured, where, why it matters, the fix), the
full check table with its mismatch statistics, what the submission printed and the sandbox.

A batch ends with a table of every submission in the order given, then the run's summary; with
``-q`` each submission is one line. The reporter keeps a ``Row`` per submission, never the
Reports (a batch may hold tens of thousands).

Every piece of text is a rich Text, never markup: what came from the submission cannot inject
markup, and no title is parsed for markup or emoji names. Text from the submission also has its
control characters shown as escapes (``shown``), so it cannot move the cursor, recolour or
retitle the terminal, and its newlines too (but in what it printed), so it cannot start a line of
the report.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Iterable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from grader.checks.base import CheckResult
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.report import untrusted
from grader.report.audience import is_for_candidate, shown_to
from grader.report.base import RunInfo
from grader.report.heatmap import case_heatmap, telling_failure
from grader.report.model import Report
from grader.report.summary import Row, RunSummary
from grader.sandbox.isolation import GUARANTEES, Layer, missing_guarantees

MARKS = {"passed": ("PASS", "green"), "failed": ("FAIL", "red"), "skipped": ("SKIP", "yellow"), "error": ("ERR", "magenta")}
# The width of a report written to a file or a pipe (a CI log), the README's example width.
PIPED_WIDTH = 100
VERDICTS = {"passed": ("PASSED", "bold green"), "failed": ("FAILED", "bold red"), "not graded": ("NOT GRADED", "bold magenta")}
OUTPUT_LINES = 12


def shown(text: str, style: str = "") -> Text:
    """Text from a submission as a rich Text on one line: never markup, its control characters
    (newline included) escaped, no workflow command in it (see grader.report.untrusted)."""
    return Text(untrusted.no_commands(untrusted.line(text)), style=style)


def shown_lines(text: str, style: str = "") -> Text:
    """As ``shown``, keeping newlines and tabs: the layout of what a submission printed."""
    return Text(untrusted.no_commands(untrusted.lines(text)), style=style)


# ---------------------------------------------------------------------------------------------
# Pieces of one report


def verdict_text(verdict: str) -> Text:
    word, style = VERDICTS.get(verdict, (verdict.upper(), "bold"))
    return Text(word, style=style)


def header(report: Report) -> Text:
    """The first line: verdict, submission, points, bugs named, time."""
    bugs = len(report.errors)
    named = f"  {bugs} bug{'s' if bugs != 1 else ''} named" if bugs else ""
    return Text.assemble(
        verdict_text("passed" if report.passed else ("not graded" if report.error is not None else "failed")),  # the next line says why
        "  ",
        shown(report.path, "bold"),
        f"  {report.score:g}/{report.max_score:g} points",
        (named, "red"),
        (f"  {report.duration_s:.2f} s", "dim"),
    )


def where_text(d: Diagnosis) -> Text | None:
    """``file:line  code``, or ``file cell 3, line 2  code`` in a notebook."""
    loc = d.location
    if loc is None:
        return None
    where = f"{loc.file} cell {loc.cell}, line {loc.line}" if loc.cell else f"{loc.file}:{loc.line}"
    return Text.assemble(shown(where, "dim"), "  ", shown(loc.code.strip(), "bold yellow"))


def plain_words(d: Diagnosis, sentence: bool = False) -> str:
    """The mistake in plain words: its rule's title (or, with ``sentence``, its plain sentence),
    and the formula found when the rule names one."""
    rule = BY_NAME.get(d.name)
    text = (rule.summary if sentence else rule.title) if rule is not None else d.message
    formula = d.evidence.get("formula")
    return f"{text.rstrip('.')}: {formula}" if isinstance(formula, str) and formula else text


def bug_block(d: Diagnosis, heat: RenderableType | None) -> Group:
    """One named bug, short: code, name and plain words; where; the fix; the heat map it explains."""
    color = "red" if d.severity == "error" else "yellow"
    title = Text.assemble(shown(f"{d.code} {d.name}", f"bold {color}"), "  ", shown(plain_words(d)))
    rows = Table.grid(padding=(0, 2, 0, 0))
    rows.add_column(no_wrap=True)
    rows.add_column(overflow="fold")
    where = where_text(d)
    if where is not None:
        rows.add_row(Text("  where", style="bold"), where)
    rows.add_row(Text("  fix", style="bold"), shown(d.fix, "green"))
    return Group(title, rows, *([heat] if heat is not None else []))


def note_line(d: Diagnosis) -> Text:
    """A diagnosis other than a bug (a warning), on one line."""
    where = f" ({d.location.file}:{d.location.line})" if d.location is not None else ""
    text = Text.assemble(shown(f"{d.code} {d.name}", "bold yellow"), "  ", shown(plain_words(d)), shown(where, "dim"))
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def short_summary(check: CheckResult) -> str:
    """The first clause of a check's summary: "4 of 4 comparisons fail", without the figures; or,
    where the worker gave no result to compare (it ran out of time or memory, or died), that."""
    failed = [c for c in check.cases if not c.passed]
    reasons = {c.summary for c in failed}
    if failed and len(reasons) == 1 and all(c.actual is None for c in failed) and (reason := reasons.pop()).startswith("no result"):
        return reason
    return check.summary.split("; ", 1)[0]


def check_lines(report: Report) -> Group:
    """The failed checks one line each, with the bugs that explain them, cut with an ellipsis at
    the terminal's width (the whole summary is in ``-v``); then the skipped and the passed ones,
    a line per kind of outcome, wrapped so that every name shows."""
    failed = [c for c in report.checks if c.outcome in ("failed", "error")]
    id_width = max((len(untrusted.line(c.id)) for c in failed), default=0)
    points_width = max((len(f"{c.points:g}/{c.max_points:g}") for c in failed), default=0)
    lines: list[Text] = []
    for check in failed:
        mark, style = MARKS[check.outcome]
        codes = [d.code for d in report.diagnoses if check.id in d.checks]
        lines.append(Text.assemble(
            (f"{mark:<4}  ", f"bold {style}"),
            shown(f"{untrusted.line(check.id):<{id_width}}  ", "bold"),
            (f"{f'{check.points:g}/{check.max_points:g}':>{points_width}}  ", "dim"),
            shown(short_summary(check)),
            shown(f"  ({', '.join(codes)})" if codes else "", "dim"),
        ))
    for line in lines:
        line.no_wrap, line.overflow = True, "ellipsis"
    # The skipped and the passed checks wrap under their mark: every name is shown.
    folded = Table.grid()
    folded.add_column(no_wrap=True)
    folded.add_column(overflow="fold")
    skipped: dict[str, list[str]] = {}
    for check in report.checks:
        if check.outcome == "skipped":
            skipped.setdefault(check.summary.removeprefix("skipped: "), []).append(check.id)
    for why, ids in skipped.items():
        folded.add_row(Text("SKIP  ", "bold yellow"), Text.assemble(f"{_count(ids, 'skipped')} ", shown(f"({why}): {', '.join(ids)}", "dim")))
    passed = [c.id for c in report.checks if c.passed]
    if passed:
        folded.add_row(Text("PASS  ", "bold green"), Text.assemble(f"{_count(passed, 'passed')}: ", shown(", ".join(passed), "dim")))
    return Group(*lines, folded) if folded.row_count else Group(*lines)


def _count(ids: list[str], outcome: str) -> str:
    return f"{len(ids)} check{'s' if len(ids) != 1 else ''} {outcome}"


def check_table(report: Report) -> Table:
    """The checks, one a row: mark, id, points, and the summary, wrapped in its own column (a
    word wider than the column is folded onto the next line, not cut, so no message is lost)."""
    table = Table.grid(padding=(0, 2, 0, 0))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(overflow="fold")
    for check in report.checks:
        mark, style = MARKS[check.outcome]
        table.add_row(
            Text(mark, style=f"bold {style}"),
            shown(check.id, style="bold"),
            Text(f"{check.points:g}/{check.max_points:g}", style="dim"),
            shown(check.summary),
        )
    return table


def diagnosis_panel(d: Diagnosis, candidate: bool = False) -> Panel:
    """A diagnosis in full: what was measured, where, why it matters, the fix."""
    rule = BY_NAME.get(d.name)
    rows = Table.grid(padding=(0, 2, 0, 0))
    rows.add_column(style="bold", no_wrap=True)
    rows.add_column(overflow="fold")
    rows.add_row(Text("What"), shown(plain_words(d, sentence=True)))
    if not candidate:  # a candidate's message is the plain words already (grader.report.audience)
        rows.add_row(Text("Measured"), shown(d.message))
    if d.location is not None:
        where = f"cell {d.location.cell}, line {d.location.line}" if d.location.cell else f"line {d.location.line}"
        rows.add_row(Text("Where"), Text.assemble(shown(f"{d.location.file} {where}: ", "dim"), shown(d.location.code.strip(), "bold yellow")))
    if rule is not None:
        rows.add_row(Text("Why"), Text(rule.why))
    rows.add_row(Text("Fix"), shown(d.fix, "green"))
    color = "red" if d.severity == "error" else "yellow"
    # Titles as Text, not markup: nothing in them is read as markup (or as an emoji name).
    title = Text.assemble(shown(f"{d.code} {d.name}", f"bold {color}"), " ", (f"({d.severity})", "dim"))
    subtitle = shown(f"grade explain {d.name}", "dim")
    return Panel(rows, title=title, title_align="left", subtitle=subtitle, subtitle_align="right", border_style=color)


def output_block(report: Report) -> RenderableType | None:
    out = report.output
    if out.total_bytes == 0:
        return None
    if is_for_candidate(report):  # it ran on the hidden inputs: it could print them
        return Text(f"the submission printed {out.total_bytes} bytes (not shown: it ran on the hidden inputs)", style="dim")
    # Escaped before it is cut into lines: a carriage return or a form feed is shown, not taken
    # as a line break (str.splitlines would).
    lines = untrusted.lines(out.text).split("\n")
    if lines and not lines[-1]:
        lines.pop()
    note = f"the submission printed {out.total_bytes} bytes"
    if out.truncated_bytes or len(lines) > OUTPUT_LINES:
        note += f"; showing the first {min(len(lines), OUTPUT_LINES)} lines"
        if out.truncated_bytes:
            note += f" ({out.truncated_bytes} bytes were cut)"
    return Panel(shown_lines("\n".join(lines[:OUTPUT_LINES])), title=Text(note, style="dim"), title_align="left", border_style="dim")


def sandbox_line(layers: tuple[Layer, ...]) -> Text:
    """Which isolation was in force for this submission, in one line."""
    if not layers:
        return Text("sandbox   not reported (the worker ended before isolating itself)", style="yellow")
    missing = missing_guarantees(layers)
    held = [g for g in GUARANTEES if g not in missing]
    active = sum(layer.active for layer in layers)
    counts = f"{active}/{len(layers)} layers"
    if not missing:
        return Text(f"sandbox   network, filesystem and process isolated ({counts})", style="dim")
    text = f"sandbox   NOT isolated: {', '.join(missing)}"
    text += f"; isolated: {', '.join(held)}" if held else ""
    return Text(f"{text} ({counts}; see grade --sandbox-info)", style="yellow")


def _heat_owner(report: Report) -> tuple[Diagnosis | None, RenderableType | None]:
    """The heat map of the most telling weights failure, and the first diagnosis that explains
    its check (the map goes below it), or None when no diagnosis does. A mistake in the math
    comes before a crash: weights that were drawn are weights the code computed, so they show
    the former (3-D-only code that raises on other ranks and divides by d_k where it runs)."""
    found = telling_failure(report)
    if found is None:
        return None, None
    check_id, case = found
    explaining = [d for d in (*report.errors, *report.diagnoses) if check_id in d.checks]
    owner = next((d for d in explaining if d.name != "crash"), explaining[0] if explaining else None)
    return owner, case_heatmap(case)


def render(report: Report, verbose: bool = False) -> Group:
    """One report: short by default (a screen), every figure with ``verbose``."""
    top: list[RenderableType] = [header(report)]
    sandbox_known = report.worker_status != "not-run"
    if sandbox_known and (verbose or not report.sandbox or missing_guarantees(report.sandbox)):
        top.append(sandbox_line(report.sandbox))  # a missing isolation is news even when short
    if report.error:
        top.append(shown(f"  {report.error}", "red"))
    also = report.extra.get("also_defined_in")
    if isinstance(also, list) and also:
        top.append(shown(f"  also defined in {', '.join(str(a) for a in also)}: not graded (--submission-file chooses another)", "dim"))
    owner, heat = _heat_owner(report)
    found: list[RenderableType] = []
    rest: list[RenderableType] = []
    if verbose:
        candidate = is_for_candidate(report)
        for d in (*report.errors, *report.warnings):
            found.append(diagnosis_panel(d, candidate))
            if d is owner and heat is not None:
                found.append(heat)
        if report.checks:
            rest.append(check_table(report))
    else:
        for i, d in enumerate(report.errors):
            found.extend([Text(), bug_block(d, heat if d is owner else None)] if i else [bug_block(d, heat if d is owner else None)])
        found.extend(note_line(d) for d in report.warnings)
        if report.checks:
            rest.append(check_lines(report))
    if heat is not None and owner is None:
        found.append(heat)
    block = output_block(report)  # what it printed, last: seldom the point, sometimes the clue
    if block is not None:
        rest.append(block)
    sections = [Group(*section) for section in (top, found, rest) if section]
    spaced: list[RenderableType] = []
    for section in sections:
        spaced.extend([Text(), section] if spaced else [section])
    return Group(*spaced)


# ---------------------------------------------------------------------------------------------
# The run: one line per submission, the batch table, the summary


def one_line(item: Report | Row) -> Text:
    """The --quiet form: verdict, path, points, the names of the bugs found (or why not graded)."""
    row = item if isinstance(item, Row) else Row.of(item)
    names = ", ".join(name for _, name in row.bugs) or (row.error or "")
    return Text.assemble(verdict_text(row.verdict), "  ", shown(row.path, "bold"), f"  {row.score:g}/{row.max_score:g}", shown("  " + names if names else "", "red"))


def batch_table(rows: Iterable[Row], width: int = 100) -> Table:
    """Every submission, one row each, in the order given. The columns have fixed widths worked
    out here, so rich measures no cell: tens of thousands of rows print in seconds."""
    rows = list(rows)
    candidate_width = min(max((len(untrusted.line(r.candidate)) for r in rows), default=9), max(12, width // 3))
    score_width = max((len(f"{r.score:g}/{r.max_score:g}") for r in rows), default=5)
    table = Table(box=None, padding=(0, 2, 0, 0), title="submissions", title_justify="left", title_style="bold", show_edge=False)
    table.add_column("candidate", width=max(candidate_width, 9), no_wrap=True, overflow="ellipsis")
    table.add_column("verdict", width=10, no_wrap=True)
    table.add_column("score", width=max(score_width, 5), justify="right", no_wrap=True)
    table.add_column("bugs named", overflow="fold", ratio=1)
    table.add_column("time", width=8, justify="right", no_wrap=True)
    for r in rows:
        word, style = VERDICTS.get(r.verdict, (r.verdict, ""))
        found = ", ".join(name for _, name in r.bugs) or (r.error or "")
        time = "cached" if r.cached else f"{r.duration_s:.2f} s"
        table.add_row(shown(r.candidate), Text(word.lower(), style=style), f"{r.score:g}/{r.max_score:g}", shown(found, "red" if r.bugs else "dim"), Text(time, style="dim"))
    return table


def summary_table(summary: RunSummary, counts_only: bool = False) -> Group:
    """The end of a batch: verdict counts, then (unless ``counts_only``: --quiet) the most
    frequent diagnoses and the slowest submissions."""
    counts = Text.assemble(
        (f"{summary.passed} passed", "bold green"), ", ",
        (f"{summary.failed} failed", "bold red" if summary.failed else ""), ", ",
        (f"{summary.errors} not graded", "bold magenta" if summary.errors else ""),
        f" of {summary.total} submissions",
        (f" ({summary.cached} from the cache)" if summary.cached else "", "dim"),
    )
    parts: list[RenderableType] = [counts]
    if counts_only:
        return Group(*parts)
    if summary.diagnoses:
        table = Table(title="most frequent diagnoses", title_justify="left", box=None, padding=(0, 2, 0, 0))
        table.add_column("code")
        table.add_column("name")
        table.add_column("submissions", justify="right")
        for code, name, count in summary.diagnoses:
            table.add_row(shown(code), shown(name), str(count))
        parts.append(table)
    if summary.slowest:
        table = Table(title="slowest submissions", title_justify="left", box=None, padding=(0, 2, 0, 0))
        table.add_column("submission")
        table.add_column("seconds", justify="right")
        for path, seconds in summary.slowest:
            table.add_row(shown(path), f"{seconds:.2f}")
        parts.append(table)
    return Group(*parts)


class TextReporter:
    """Prints each report as it is added (in the order of the submissions: grader.report.sinks
    reorders them), keeps only its Row, and ends a batch with the table and the summary."""

    streaming = True

    def __init__(self, console: Console, info: RunInfo | None = None, quiet: bool = False) -> None:
        self.console = console
        self.info = info or RunInfo("", 0.0, quiet=quiet)
        self.quiet = quiet or self.info.quiet
        self.rows: list[Row] = []

    def add(self, report: Report) -> None:
        report = shown_to(report, self.info.audience)
        row = Row.of(report)
        self.rows.append(row)
        if self.quiet:
            self.console.print(one_line(row), soft_wrap=True)  # one line, however long the path
            return
        self.console.print(render(report, verbose=self.info.verbose))
        self.console.print()

    def finish(self) -> None:
        if len(self.rows) <= 1:
            return
        if not self.quiet:  # with -q the lines above are the table already
            self.console.print(batch_table(self.rows, self.console.width))
        self.console.print()
        self.console.print(summary_table(RunSummary.of(self.rows), counts_only=self.quiet))


def text_reporter(stream: IO[str], info: RunInfo) -> TextReporter:
    if stream is sys.stdout:
        # Colours on a terminal only. Piped or in a CI log, rich would lay the report out at 80
        # columns, wrapping the verdict line; it gets the width of a file report (or $COLUMNS).
        piped = not stream.isatty() and "COLUMNS" not in os.environ
        return TextReporter(Console(highlight=False, emoji=False, width=PIPED_WIDTH if piped else None), info)
    return TextReporter(Console(file=stream, highlight=False, emoji=False, color_system=None, width=PIPED_WIDTH), info)
