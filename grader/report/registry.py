"""Every report format and the reporter that writes it."""

from __future__ import annotations

from typing import IO, Callable

from grader.report.base import FORMATS, Format, Reporter, RunInfo
from grader.report.csvfmt import CsvReporter
from grader.report.github import GithubReporter
from grader.report.gradescope import GradescopeReporter
from grader.report.html import HtmlReporter
from grader.report.jsonfmt import JsonReporter
from grader.report.junit import JunitReporter
from grader.report.markdown import MarkdownReporter
from grader.report.text import text_reporter

__all__ = ["FORMATS", "Format", "Reporter", "RunInfo", "make_reporter"]


def make_reporter(fmt: Format, stream: IO[str], info: RunInfo) -> Reporter:
    """The reporter for ``fmt``, writing to ``stream``."""
    makers: dict[Format, Callable[[IO[str], RunInfo], Reporter]] = {
        "text": text_reporter,
        "json": JsonReporter,
        "junit": JunitReporter,
        "gradescope": GradescopeReporter,
        "csv": CsvReporter,
        "markdown": MarkdownReporter,
        "github": GithubReporter,
        "html": HtmlReporter,
    }
    return makers[fmt](stream, info)
