"""Report files: ``--output FMT=PATH`` parsed, checked before grading, written atomically."""

from __future__ import annotations

from dataclasses import dataclass
import errno
import io
import os
from pathlib import Path
from typing import cast

from grader.errors import OutputError, UsageError
from grader.fsutil import write_atomically
from grader.report.model import Report
from grader.report.registry import FORMATS, Format, RunInfo, make_reporter


@dataclass(frozen=True)
class OutputSpec:
    """One --output FMT=PATH: a report file to write."""

    fmt: Format
    path: Path


def parse_output(text: str) -> OutputSpec:
    """``FMT=PATH``. Raises UsageError for another form or an unknown format."""
    fmt, sep, path = text.partition("=")
    if not sep or not path:
        raise UsageError(f"--output {text!r}: expected FMT=PATH, for example junit=report.xml")
    if fmt not in FORMATS:
        raise UsageError(f"--output {text!r}: unknown format '{fmt}'; known: {', '.join(FORMATS)}")
    return OutputSpec(cast(Format, fmt), Path(path))


def check_writable(path: Path) -> None:
    """Raises OutputError now, before any grading, when ``path`` could not be written later."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise OutputError(f"{path}: is a folder")
    if not parent.is_dir():
        raise OutputError(f"{path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write in {parent}: permission denied")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"{path}: permission denied")


def render_document(fmt: Format, reports: list[Report], info: RunInfo) -> str:
    """The whole report file in ``fmt``, in memory: it is written in one go, atomically."""
    buffer = io.StringIO()
    reporter = make_reporter(fmt, buffer, info)
    for report in reports:
        reporter.add(report)
    reporter.finish()
    return buffer.getvalue()


def write_report_file(path: Path, text: str) -> None:
    """Write atomically. Raises OutputError (no file, and no partial file, is left behind)."""
    try:
        write_atomically(path, text.encode("utf-8", errors="replace"))  # a lone surrogate from a submission
    except OSError as exc:
        why = "no space left on the device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        raise OutputError(f"{path}: {why}") from None
