"""The CSV gradebook: one row per submission.

Columns: path, passed, score, max_score, diagnoses (names separated by spaces), duration_s,
error. The csv module quotes commas, quotes and newlines. Paths and messages are the candidates'
(a folder may be named ``=HYPERLINK(...)``), so a text cell that a spreadsheet would take as a
formula (starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return) gets a leading ``'``.
"""

from __future__ import annotations

import csv
from typing import IO

from grader.report.base import DocumentReporter, RunInfo
from grader.report.model import Report

COLUMNS = ("path", "passed", "score", "max_score", "diagnoses", "duration_s", "error")


def cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class CsvReporter(DocumentReporter):
    def finish(self) -> None:
        writer = csv.writer(self.stream, lineterminator="\n")
        writer.writerow(COLUMNS)
        for r in self.reports:
            names = " ".join(d.name for d in r.diagnoses)
            writer.writerow([cell(r.path), "true" if r.passed else "false", f"{r.score:g}", f"{r.max_score:g}", names, f"{r.duration_s:.3f}", cell(r.error or "")])
