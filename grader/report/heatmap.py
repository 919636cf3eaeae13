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
from rich.console import Group, RenderableType
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


def _most_telling_failure(report: Report) -> CaseResult | None:
    """The failing weights comparison that shows most: a stored case before a fresh one (the same
    picture on every run), a single sequence that fits uncut, with the largest difference (a wrong
    scale shows most at a large d_k)."""
    found: list[tuple[tuple[bool, bool, bool, float], int, CaseResult]] = []
    for check in report.checks:
        for case in check.cases:
            if case.what != "weights" or case.passed or case.actual is None or case.expected is None:
                continue
            if case.actual.shape == case.expected.shape and case.actual.ndim >= 2 and case.actual.dtype.kind in "fiu":
                fits = max(case.actual.shape[-2:]) <= MAX_SIZE
                diff = case.mismatch.max_abs if case.mismatch is not None and math.isfinite(case.mismatch.max_abs) else math.inf
                stored = not case.case.startswith(FRESH_PREFIX)
                found.append(((stored, case.actual.ndim == 2, fits, diff), len(found), case))
    return max(found, key=lambda f: (f[0], -f[1]))[2] if found else None


def weights_heatmap(report: Report) -> RenderableType | None:
    """The heat maps for the first failing weights comparison of the report, or None."""
    case = _most_telling_failure(report)
    if case is None:
        return None
    assert case.actual is not None and case.expected is not None
    lead = (0,) * (case.actual.ndim - 2)
    mine = np.asarray(case.actual[lead], dtype=np.float64)
    ref = np.asarray(case.expected[lead], dtype=np.float64)
    where = untrusted.no_commands(untrusted.line(case.probe)) + (f"[{', '.join('0' for _ in lead)}]" if lead else "")
    tq, tk = mine.shape
    cut = f"; first {min(tq, MAX_SIZE)} of {tq} rows, {min(tk, MAX_SIZE)} of {tk} columns" if tq > MAX_SIZE or tk > MAX_SIZE else ""
    legend = Text.assemble(
        (f"weights of {where}: rows are queries, columns keys{cut}. ", "dim"),
        ("blank < 0.05 ░ < 0.2 ▒ < 0.4 ▓ < 0.7 █ ; -- negative, !! above 1, ?? nan or inf", "dim"),
    )
    # A narrow terminal crops a matrix rather than folding its rows, which would scramble it.
    table = Table(box=None, padding=(0, 2))
    table.add_column("submission", no_wrap=True, overflow="crop")
    table.add_column("reference", no_wrap=True, overflow="crop")
    table.add_row(matrix_text(mine), matrix_text(ref))
    return Group(legend, table)
