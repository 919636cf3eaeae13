"""The CSV gradebook: one row per submission.

Columns: path, passed, score, max_score, diagnoses (names separated by spaces), duration_s,
error. Every cell is quoted (``QUOTE_ALL``), so each row starts with a quote. Paths and messages
are the candidates', so every text cell is one line with its control characters shown as escapes
(a carriage return or newline in a name is ``\\r``, ``\\n``: no reader starts a row inside it), has
no workflow command (grader.report.untrusted), and, when a spreadsheet would take it as a formula
(starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return; a folder may be named
``=HYPERLINK(...)``), gets a leading ``'``.
"""

from __future__ import annotations

import csv
from typing import IO

from grader.report import untrusted
from grader.report.base import DocumentReporter, RunInfo
from grader.report.model import Report

COLUMNS = ("path", "passed", "score", "max_score", "diagnoses", "duration_s", "error")


def cell(text: str) -> str:
    text = untrusted.no_commands(untrusted.line(text))
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class CsvReporter(DocumentReporter):
    def finish(self) -> None:
        writer = csv.writer(self.stream, lineterminator="\n", quoting=csv.QUOTE_ALL)
        writer.writerow(COLUMNS)
        for r in self.reports:
            names = " ".join(d.name for d in r.diagnoses)
            writer.writerow([cell(r.path), "true" if r.passed else "false", f"{r.score:g}", f"{r.max_score:g}", cell(names), f"{r.duration_s:.3f}", cell(r.error or "")])
