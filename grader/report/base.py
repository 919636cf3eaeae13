"""What every reporter is: a sink over one stream of Reports.

A reporter is made with the stream it writes to and the run's facts, gets ``add(report)`` once
per graded submission and ``finish()`` once at the end. A *streaming* reporter writes as reports
arrive (the terminal report, GitHub annotations); the others write one document in ``finish``
and are given the reports in the order of the submissions, whatever order they finished in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Literal, Protocol


if TYPE_CHECKING:  # the CLI imports this module before the fork server starts: keep it light
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


class Reporter(Protocol):
    streaming: bool

    def add(self, report: Report) -> None: ...

    def finish(self) -> None: ...


# The module each format's reporter lives in: a cold run imports it in the background while its
# first worker runs (the terminal report's, with rich, is the largest import after numpy).
REPORTER_MODULES: dict[str, str] = {
    "text": "grader.report.text",
    "json": "grader.report.jsonfmt",
    "junit": "grader.report.junit",
    "gradescope": "grader.report.gradescope",
    "csv": "grader.report.csvfmt",
    "markdown": "grader.report.markdown",
    "github": "grader.report.github",
}


def make_reporter(fmt: Format, stream: IO[str], info: RunInfo) -> Reporter:
    """The reporter for ``fmt``, importing only its own module (the CLI stays quick to start)."""
    if fmt == "text":
        from grader.report.text import text_reporter

        return text_reporter(stream, info)
    if fmt == "json":
        from grader.report.jsonfmt import JsonReporter

        return JsonReporter(stream, info)
    if fmt == "junit":
        from grader.report.junit import JunitReporter

        return JunitReporter(stream, info)
    if fmt == "gradescope":
        from grader.report.gradescope import GradescopeReporter

        return GradescopeReporter(stream, info)
    if fmt == "csv":
        from grader.report.csvfmt import CsvReporter

        return CsvReporter(stream, info)
    if fmt == "markdown":
        from grader.report.markdown import MarkdownReporter

        return MarkdownReporter(stream, info)
    from grader.report.github import GithubReporter

    return GithubReporter(stream, info)


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
