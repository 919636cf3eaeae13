"""The terminal report, rendered with rich.

One line per check, then a panel per diagnosis (what was measured, why it matters, the fix), then
what the submission printed. Every piece of text is a rich Text, never markup: what came from the
submission cannot inject markup, and no title is parsed for markup or emoji names.
"""

from __future__ import annotations

import sys
from typing import IO, Iterator

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.panel import Panel
from rich.segment import Segment
from rich.text import Text

from grader.diagnosis.model import Diagnosis
from grader.diagnosis.registry import BY_NAME
from grader.report.base import RunInfo
from grader.report.heatmap import weights_heatmap
from grader.report.model import Report
from grader.report.summary import RunSummary
from grader.sandbox.isolation import GUARANTEES, Layer, missing_guarantees

MARKS = {"passed": ("PASS", "green"), "failed": ("FAIL", "red"), "skipped": ("SKIP", "yellow"), "error": ("ERR ", "magenta")}
OUTPUT_LINES = 12
GAP = "  "  # between the columns of the check lines


class CheckLines:
    """The checks, one a line: mark, id, points, and the summary wrapped under itself.

    What a rich Table with these four columns draws, at a fraction of the cost: a Table measures
    every cell to share out the width, which made this block half of a report's rendering time.
    Here only the summaries are wrapped, into the width the first three columns leave."""

    def __init__(self, report: Report) -> None:
        self.rows = [(*MARKS[c.outcome], c.id, f"{c.points:g}/{c.max_points:g}", c.summary) for c in report.checks]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        if not self.rows:
            return
        ids = max(len(row[2]) for row in self.rows)
        points = max(len(row[3]) for row in self.rows)
        lead = len("PASS") + ids + points + 3 * len(GAP)
        width = max(options.max_width - lead, 10)
        for mark, style, check_id, score, summary in self.rows:
            first = Text.assemble((mark, f"bold {style}"), GAP, (check_id.ljust(ids), "bold"), GAP, (score.rjust(points), "dim"), GAP)
            for number, line in enumerate(Text(summary).wrap(console, width)):
                yield from (first if number == 0 else Text(" " * lead)).render(console)
                yield from line.render(console)
                yield Segment.line()


def diagnosis_panel(d: Diagnosis) -> Panel:
    rule = BY_NAME.get(d.name)
    parts: list[RenderableType] = [Text.assemble(("Measured  ", "bold"), d.message)]
    if d.location is not None:
        where = f"cell {d.location.cell}, line {d.location.line}" if d.location.cell else f"line {d.location.line}"
        parts.append(Text.assemble(("Where     ", "bold"), (f"{d.location.file} {where}: ", "dim"), (d.location.code.strip(), "bold yellow")))
    if rule is not None:
        parts.append(Text.assemble(("Why       ", "bold"), rule.why))
    parts.append(Text.assemble(("Fix       ", "bold"), (d.fix, "green")))
    color = "red" if d.severity == "error" else "yellow"
    # Titles as Text, not markup: nothing in them is read as markup (or as an emoji name).
    title = Text.assemble((f"{d.code} {d.name}", f"bold {color}"), " ", (f"({d.severity})", "dim"))
    subtitle = Text(f"grade --explain {d.name}", style="dim")
    return Panel(Group(*parts), title=title, title_align="left", subtitle=subtitle, subtitle_align="right", border_style=color)


def output_block(report: Report) -> RenderableType | None:
    out = report.output
    if out.total_bytes == 0:
        return None
    lines = out.text.splitlines()
    shown = "\n".join(lines[:OUTPUT_LINES])
    note = f"the submission printed {out.total_bytes} bytes"
    if out.truncated_bytes or len(lines) > OUTPUT_LINES:
        note += f"; showing the first {min(len(lines), OUTPUT_LINES)} lines"
        if out.truncated_bytes:
            note += f" ({out.truncated_bytes} bytes were cut)"
    return Panel(Text(shown), title=Text(note, style="dim"), title_align="left", border_style="dim")


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
        (report.path, "bold"),
        f"  {report.score:g}/{report.max_score:g} points",
        (f"  {report.duration_s:.2f} s", "dim"),
    )
    parts: list[RenderableType] = [header]
    if report.worker_status != "not-run":
        parts.append(sandbox_line(report.sandbox))
    if report.error:
        parts.append(Text(f"  {report.error}", style="red"))
    if report.checks:
        parts.append(CheckLines(report))
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
    return Text.assemble(verdict, "  ", (report.path, "bold"), f"  {report.score:g}/{report.max_score:g}", ("  " + names if names else "", "red"))


def summary_table(summary: RunSummary) -> Group:
    """The end of a batch: verdict counts, the most frequent diagnoses, the slowest submissions."""
    from rich.table import Table  # here: a report of one submission needs no table

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
            table.add_row(Text(code), Text(name), str(count))  # Text: never read as markup
        parts.append(table)
    if summary.slowest:
        table = Table(title="slowest submissions", title_justify="left", box=None, padding=(0, 2, 0, 0))
        table.add_column("submission")
        table.add_column("seconds", justify="right")
        for path, seconds in summary.slowest:
            table.add_row(Text(path), f"{seconds:.2f}")
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
