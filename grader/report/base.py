"""What every reporter is: a sink over one stream of Reports (the formats' registry is
``grader.report.registry``).

A reporter is made with the stream it writes to and the run's facts, gets ``add(report)`` once
per graded submission and ``finish()`` once at the end. Every reporter is given the reports in
the order of the submissions, whatever order they finished in: ``grader.report.sinks`` reorders
them, in one place, for all the reporters of a run. A *streaming* reporter writes each report
as it is given (the terminal report, annotations); the others write one document, as the
reports arrive (JSON, JUnit) or at the end. Either way a reporter keeps no Report once ``add``
returns: a batch of any size must not keep every Report, and the arrays behind its checks,
alive until the end. What it needs at the end it keeps as a ``grader.report.summary.Row`` or
as running totals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from grader.report.model import Report
from grader.report.roster import Roster

Format = Literal["text", "json", "junit", "gradescope", "csv", "markdown", "github", "html"]
FORMATS: tuple[Format, ...] = ("text", "json", "junit", "gradescope", "csv", "markdown", "github", "html")


@dataclass(frozen=True)
class RunInfo:
    """What reporters need to know of the run besides the reports."""

    suite_name: str
    max_score: float
    quiet: bool = False
    color: bool = False  # the text report on a terminal
    verbose: bool = False  # -v: every figure, mismatch statistic and full why-text
    audience: Literal["reviewer", "candidate"] = "reviewer"  # candidate: nothing of the stored cases
    roster: Roster | None = None  # --roster: joined into the CSV gradebook
    # The run behind the reports, for the JSON report's header (what `grade merge` checks):
    discovered: int | None = None  # submissions found before --shard took its slice
    shard: str | None = None  # "I/N" with --shard
    expected: int | None = None  # the submissions this run set out to grade: fewer reports, it was interrupted
    suite_fingerprint: str | None = None  # grader.suite.Suite.fingerprint()

    def interrupted(self, graded: int) -> str:
        """"interrupted: 6 of 18 graded" when the run stopped short of what it set out to grade, else ""."""
        return f"interrupted: {graded} of {self.expected} graded" if self.expected is not None and graded < self.expected else ""


class Reporter(Protocol):
    streaming: bool

    def add(self, report: Report) -> None: ...

    def finish(self) -> None: ...

