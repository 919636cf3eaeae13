"""A small terminal heat map of a weight matrix: the submission's beside the reference's.

With V = identity the output is the weight matrix, so a weights failure has both matrices at hand.
Each weight is drawn as a two-character block whose shade (and, on a colour terminal, colour) says
how large it is on a fixed 0..1 scale: a flat row is a band of the same faint shade, a one-hot row
a single solid block. Values outside 0..1 (no softmax) and non-finite ones get marks of their own.
Large matrices are cut to MAX_SIZE rows and columns.
"""

from __future__ import annotations

import math

import numpy as np
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from grader.checks.base import CaseResult
from grader.probes import FRESH_PREFIX
from grader.report import untrusted
from grader.report.model import Report

MAX_SIZE = 12
# (upper bound, glyph): the glyph carries the level even without colour.
LEVELS = ((0.05, "  "), (0.2, "░░"), (0.4, "▒▒"), (0.7, "▓▓"), (math.inf, "██"))
COLOURS = ("grey23", "blue", "cyan", "yellow", "bright_white")


def _cell(value: float) -> Text:
    if not math.isfinite(value):
        return Text("??", style="bold red")
    if value < -1e-9:
        return Text("--", style="bold magenta")
    if value > 1.0 + 1e-9:
        return Text("!!", style="bold magenta")
    for (bound, glyph), colour in zip(LEVELS, COLOURS):
        if value < bound:
            return Text(glyph, style=f"{colour} on grey11")
    return Text("██", style="bright_white on grey11")  # pragma: no cover - the last bound is infinite


def matrix_text(weights: np.ndarray) -> Text:
    rows = []
    for row in weights[:MAX_SIZE, :MAX_SIZE]:
        line = Text()
        for value in row:
            line.append_text(_cell(float(value)))
        rows.append(line)
    return Text("\n").join(rows)


def telling_failure(report: Report) -> tuple[str, CaseResult] | None:
    """The failing weights comparison that shows most, with the id of its check: a stored case
    before a fresh one (the same picture on every run), a single sequence that fits uncut, with
    the largest difference (a wrong scale shows most at a large d_k)."""
    found: list[tuple[tuple[bool, bool, bool, float], int, str, CaseResult]] = []
    for check in report.checks:
        for case in check.cases:
            if case.what != "weights" or case.passed or case.actual is None or case.expected is None:
                continue
            if case.actual.shape == case.expected.shape and case.actual.ndim >= 2 and case.actual.dtype.kind in "fiu":
                fits = max(case.actual.shape[-2:]) <= MAX_SIZE
                diff = case.mismatch.max_abs if case.mismatch is not None and math.isfinite(case.mismatch.max_abs) else math.inf
                stored = not case.case.startswith(FRESH_PREFIX)
                found.append(((stored, case.actual.ndim == 2, fits, diff), len(found), check.id, case))
    if not found:
        return None
    best = max(found, key=lambda f: (f[0], -f[1]))
    return best[2], best[3]


def legend() -> Text:
    """The shades, four short lines to stand beside the matrices."""
    return Text.assemble(
        ("  ", "grey23 on grey11"), " < 0.05  ", ("░░", "blue on grey11"), " < 0.2\n",
        ("▒▒", "cyan on grey11"), " < 0.4   ", ("▓▓", "yellow on grey11"), " < 0.7\n",
        ("██", "bright_white on grey11"), " >= 0.7\n",
        ("--", "bold magenta"), " < 0  ", ("!!", "bold magenta"), " > 1  ", ("??", "bold red"), " nan",
        style="dim",
    )


class _Maps:
    """The two matrices side by side, the legend beside them when the line has room for it (a
    narrow terminal crops the matrices rather than folding their rows, which would scramble them,
    and leaves the legend out rather than squeeze them)."""

    def __init__(self, mine: Text, ref: Text, width: int) -> None:
        self.mine, self.ref, self.width = mine, ref, width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        key = legend()
        # Each column has 2 cells of padding on either side; the matrices are at least as wide as their heading.
        need = 2 * max(self.width, len("submission")) + max(len(line) for line in key.plain.split("\n")) + 3 * 4
        beside = options.max_width >= need
        table = Table(box=None, padding=(0, 2))
        table.add_column("submission", no_wrap=True, overflow="crop", min_width=min(self.width, 20))
        table.add_column("reference", no_wrap=True, overflow="crop", min_width=min(self.width, 20))
        if beside:
            table.add_column("", no_wrap=True, overflow="crop")
            table.add_row(self.mine, self.ref, key)
        else:
            table.add_row(self.mine, self.ref)
        yield table


def case_heatmap(case: CaseResult) -> RenderableType:
    """The submission's weights of one comparison beside the reference's, with the legend."""
    assert case.actual is not None and case.expected is not None
    lead = (0,) * (case.actual.ndim - 2)
    mine = np.asarray(case.actual[lead], dtype=np.float64)
    ref = np.asarray(case.expected[lead], dtype=np.float64)
    where = untrusted.no_commands(untrusted.line(case.probe)) + (f"[{', '.join('0' for _ in lead)}]" if lead else "")
    tq, tk = mine.shape
    cut = f"; first {min(tq, MAX_SIZE)} of {tq} rows, {min(tk, MAX_SIZE)} of {tk} columns" if tq > MAX_SIZE or tk > MAX_SIZE else ""
    title = Text(f"weights of {where} (rows are queries, columns keys{cut})", style="dim")
    return Group(title, _Maps(matrix_text(mine), matrix_text(ref), 2 * min(tk, MAX_SIZE)))


def weights_heatmap(report: Report) -> RenderableType | None:
    """The heat maps for the most telling failing weights comparison of the report, or None."""
    found = telling_failure(report)
    return None if found is None else case_heatmap(found[1])
