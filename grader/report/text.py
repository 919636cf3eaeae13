"""The terminal report, rendered with rich.

A header line, the checks as a table (mark, id, points, summary), the heat map of a failed weights
comparison, then a panel per diagnosis (what was measured, where, why it matters, the fix), then
what the submission printed. Every piece of text is a rich Text, never markup: what came from the
submission cannot inject markup, and no title is parsed for markup or emoji names. Text from the
submission also has its control characters shown as escapes (``shown``), so it cannot move the
cursor, recolour or retitle the terminal, and its newlines too (but in what it printed), so it
cannot start a line of the report.
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.report import untrusted
from grader.report.base import RunInfo
from grader.report.heatmap import weights_heatmap
from grader.report.model import Report
from grader.report.summary import RunSummary
from grader.sandbox.isolation import GUARANTEES, Layer, missing_guarantees

MARKS = {"passed": ("PASS", "green"), "failed": ("FAIL", "red"), "skipped": ("SKIP", "yellow"), "error": ("ERR", "magenta")}
OUTPUT_LINES = 12

def shown(text: str, style: str = "") -> Text:
    """Text from a submission as a rich Text on one line: never markup, its control characters
    (newline included) escaped, no workflow command in it (see grader.report.untrusted)."""
    return Text(untrusted.no_commands(untrusted.line(text)), style=style)


def shown_lines(text: str, style: str = "") -> Text:
    """As ``shown``, keeping newlines and tabs: the layout of what a submission printed."""
    return Text(untrusted.no_commands(untrusted.lines(text)), style=style)


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


def diagnosis_panel(d: Diagnosis) -> Panel:
    rule = BY_NAME.get(d.name)
    rows = Table.grid(padding=(0, 2, 0, 0))
    rows.add_column(style="bold", no_wrap=True)
    rows.add_column(overflow="fold")
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
    subtitle = shown(f"grade --explain {d.name}", "dim")
    return Panel(rows, title=title, title_align="left", subtitle=subtitle, subtitle_align="right", border_style=color)


def output_block(report: Report) -> RenderableType | None:
    out = report.output
    if out.total_bytes == 0:
        return None
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


def render(report: Report) -> Group:
    verdict = Text("PASSED", style="bold green") if report.passed else Text("FAILED", style="bold red")
    header = Text.assemble(
        verdict,
        "  ",
        shown(report.path, "bold"),
        f"  {report.score:g}/{report.max_score:g} points",
        (f"  {report.duration_s:.2f} s", "dim"),
    )
    parts: list[RenderableType] = [header]
    if report.worker_status != "not-run":
        parts.append(sandbox_line(report.sandbox))
    if report.error:
        parts.append(shown(f"  {report.error}", "red"))
    if report.checks:
        parts.append(check_table(report))
        heat = weights_heatmap(report)
        if heat is not None:
            parts.append(heat)
    parts.extend(diagnosis_panel(d) for d in report.diagnoses)
    block = output_block(report)
    if block is not None:
        parts.append(block)
    return Group(*parts)


def one_line(report: Report) -> Text:
    """The --quiet form: verdict, path, points, the names of the errors found."""
    verdict = Text("PASSED", style="bold green") if report.passed else Text("FAILED", style="bold red")
    names = ", ".join(d.name for d in report.errors) or (report.error or "")
    return Text.assemble(verdict, "  ", shown(report.path, "bold"), f"  {report.score:g}/{report.max_score:g}", shown("  " + names if names else "", "red"))


def summary_table(summary: RunSummary) -> Group:
    """The end of a batch: verdict counts, the most frequent diagnoses, the slowest submissions."""
    counts = Text.assemble(
        (f"{summary.passed} passed", "bold green"), ", ",
        (f"{summary.failed} failed", "bold red" if summary.failed else ""), ", ",
        (f"{summary.errors} not graded", "bold magenta" if summary.errors else ""),
        f" of {summary.total} submissions",
        (f" ({summary.cached} from the cache)" if summary.cached else "", "dim"),
    )
    parts: list[RenderableType] = [counts]
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
    streaming = True

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet
        self.reports: list[Report] = []

    def add(self, report: Report) -> None:
        self.reports.append(report)
        if self.quiet:
            self.console.print(one_line(report), soft_wrap=True)  # one line, however long the path
            return
        self.console.print(render(report))
        self.console.print()

    def finish(self) -> None:
        if len(self.reports) > 1:
            self.console.print(summary_table(RunSummary.of(self.reports)))


def text_reporter(stream: IO[str], info: RunInfo) -> TextReporter:
    if stream is sys.stdout:
        return TextReporter(Console(highlight=False, emoji=False), quiet=info.quiet)  # colours on a terminal only
    return TextReporter(Console(file=stream, highlight=False, emoji=False, color_system=None, width=100), quiet=info.quiet)
