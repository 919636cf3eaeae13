"""The CSV gradebook: one row per submission, ready for a spreadsheet or a learning platform.

Columns, in this order:

* ``candidate``: who the row is about (a checkout's folder name, or a submission file's stem);
* with ``--roster``: the roster's own columns (name, e-mail, student id, ...), as the roster has
  them, then ``roster``: ``listed`` when the candidate is in the roster, ``missing`` when not;
* ``path``: the graded file or folder;
* ``verdict``: ``passed``, ``failed``, ``not graded`` (nothing could be graded: no submission
  file in a checkout, ...) or, for a roster row no submission matched, ``no submission``;
* ``points:ID``, one per check of the suite, named after the check's id (``points:weights``),
  in the suite's order: the points that check gave. They sum to ``total``. A check that never
  ran for a submission (one not graded) has an empty cell;
* ``total`` and ``maximum``: the score and the most it could be;
* ``bugs``: the names of the bugs found (error-severity diagnoses), separated by spaces;
* ``duration_s``: the seconds its grading took (for a cached result, when it was graded);
* ``error``: why it could not be graded, if it could not.

A roster row with no submission keeps its place after the graded ones, in the roster's order,
with empty points and total (the course decides what a missing submission scores) and the
maximum most submissions had.

Every cell is quoted (``QUOTE_ALL``), so each row starts with a quote. Paths and messages are the
candidates' and roster values a course's, so every text cell is one line with its control
characters shown as escapes (a carriage return or newline in a name is ``\\r``, ``\\n``: no reader
starts a row inside it), has no workflow command (grader.report.untrusted), and, when a
spreadsheet would take it as a formula (starting with ``=``, ``+``, ``-``, ``@``, tab or carriage
return; a folder may be named ``=HYPERLINK(...)``), gets a leading ``'``.

Only each submission's :class:`grader.report.summary.Row` is kept until the end, never its
Report: a gradebook of fifty thousand rows costs a few megabytes.
"""

from __future__ import annotations

import csv
from collections import Counter
from typing import IO

from grader.report import untrusted
from grader.report.audience import shown_to
from grader.report.base import RunInfo
from grader.report.model import Report
from grader.report.summary import Row

POINTS_PREFIX = "points:"
# Every column the gradebook writes itself: a roster column may not take one of these names.
RESERVED = ("candidate", "roster", "path", "verdict", POINTS_PREFIX, "total", "maximum", "bugs", "duration_s", "error")


def cell(text: str) -> str:
    text = untrusted.no_commands(untrusted.line(text))
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def check_ids(rows: list[Row]) -> list[str]:
    """Every check id in the rows, in the suite's order (the first row that ran each one)."""
    return list(dict.fromkeys(check.id for row in rows for check in row.checks))


def gradebook(rows: list[Row], info: RunInfo) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the gradebook: a row per submission, then, with a roster, a
    row for each roster entry that no submission matched."""
    ids = check_ids(rows)
    roster = info.roster
    header = ["candidate"]
    if roster is not None:
        header += [*roster.columns, "roster"]
    header += ["path", "verdict", *(POINTS_PREFIX + i for i in ids), "total", "maximum", "bugs", "duration_s", "error"]
    listed = roster.by_id() if roster is not None else {}
    body: list[list[str]] = []
    for row in rows:
        line = [row.candidate]
        if roster is not None:
            values = listed.get(row.candidate)
            line += [*(values or ("",) * len(roster.columns)), "listed" if values is not None else "missing"]
        points = {check.id: f"{check.points:g}" for check in row.checks}
        line += [row.path, row.verdict, *(points.get(i, "") for i in ids), f"{row.score:g}", f"{row.max_score:g}"]
        line += [" ".join(name for _, name in row.bugs), f"{row.duration_s:.3f}", row.error or ""]
        body.append(line)
    if roster is not None:
        graded = {row.candidate for row in rows}
        # A NumPy submission's maximum leaves out the checks only PyTorch and JAX are asked
        # (grader.suite): one not submitted is given the maximum most submissions had.
        maxima = Counter(row.max_score for row in rows).most_common(1)
        maximum = maxima[0][0] if maxima else info.max_score
        for ident, values in roster.rows:
            if ident not in graded:
                body.append([ident, *values, "listed", "", "no submission", *("" for _ in ids), "", f"{maximum:g}", "", "", ""])
    return header, body


class CsvReporter:
    """Keeps a Row per submission and writes the whole gradebook in ``finish``."""

    streaming = False
    lists_every_submission = True  # an interrupted run's unreached ones too, as not graded

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.rows: list[Row] = []

    def add(self, report: Report) -> None:
        self.rows.append(Row.of(shown_to(report, self.info.audience)))  # --audience candidate

    def finish(self) -> None:
        header, body = gradebook(self.rows, self.info)
        writer = csv.writer(self.stream, lineterminator="\n", quoting=csv.QUOTE_ALL)
        writer.writerow([cell(name) for name in header])
        for line in body:
            writer.writerow([cell(text) for text in line])
