"""What every reporter is: a sink over one stream of Reports (the formats' registry is
``grader.report.registry``).

A reporter is made with the stream it writes to and the run's facts, gets ``add(report)`` once
per graded submission and ``finish()`` once at the end. A *streaming* reporter writes as reports
arrive (the terminal report, GitHub annotations); the others write one document in ``finish``
and are given the reports in the order of the submissions, whatever order they finished in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Literal, Protocol

from grader.report.model import Report

Format = Literal["text", "json", "junit", "gradescope", "csv", "markdown", "github"]
FORMATS: tuple[Format, ...] = ("text", "json", "junit", "gradescope", "csv", "markdown", "github")


@dataclass(frozen=True)
class RunInfo:
    """What reporters need to know of the run besides the reports."""

    suite_name: str
    max_score: float
    quiet: bool = False
    color: bool = False  # the text report on a terminal
    verbose: bool = False  # -v: every figure, mismatch statistic and full why-text
    audience: Literal["reviewer", "candidate"] = "reviewer"  # candidate: nothing of the stored cases


class Reporter(Protocol):
    streaming: bool

    def add(self, report: Report) -> None: ...

    def finish(self) -> None: ...


class DocumentReporter:
    """A reporter that writes one document in ``finish`` from every report it was given."""

    streaming = False

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.reports: list[Report] = []

    def add(self, report: Report) -> None:
        self.reports.append(report)

    def finish(self) -> None:
        raise NotImplementedError
