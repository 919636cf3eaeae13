"""Report files: ``--output FMT=PATH`` parsed, checked before grading, written atomically.

A run writes each report file as it goes (:class:`ReportFile`): into a temporary file in the
target's folder, renamed onto the target once complete. A reader never sees half a report, and a
run that fails or is interrupted while writing leaves the previous file (or none) and no
temporary file behind.
"""

from __future__ import annotations

from dataclasses import dataclass
import errno
import io
import os
import tempfile
from pathlib import Path
from typing import IO, cast

from grader.errors import OutputError, UsageError
from grader.fsutil import UMASK, write_atomically
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
        raise output_error(path, exc) from None


def _why(exc: OSError) -> str:
    return "no space left on the device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))


def output_error(path: Path, exc: OSError) -> OutputError:
    """The one line for a report file that could not be written."""
    return OutputError(f"{path}: {_why(exc)}")


class ReportFile:
    """A report file written while the run goes on: a temporary file beside the target (same
    folder, so same file system: the rename is atomic), ``commit`` renames it onto the target,
    ``discard`` removes it. Every OSError becomes an OutputError naming the target."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        except OSError as exc:
            raise output_error(path, exc) from None
        try:
            # mkstemp makes the file private (0600); the report gets the mode any new file would.
            os.fchmod(fd, 0o666 & ~UMASK)
            # Opened by name, so the stream's name is where it lies (see spool); errors="replace":
            # a lone surrogate a reporter let through costs one character, not the file.
            self.stream: IO[str] = open(self._tmp, "w", encoding="utf-8", errors="replace", newline="")
        except OSError as exc:
            os.unlink(self._tmp)
            raise output_error(path, exc) from None
        finally:
            os.close(fd)
        self._done = False

    def commit(self) -> None:
        """Flush the file to disk and rename it onto the target. Raises OutputError (the
        temporary file is removed first)."""
        try:
            self.stream.flush()
            os.fsync(self.stream.fileno())
            self.stream.close()
            os.replace(self._tmp, self.path)
        except OSError as exc:
            self.discard()
            raise output_error(self.path, exc) from None
        self._done = True

    def discard(self) -> None:
        """Remove the temporary file; the target is left as it was. Never raises."""
        if self._done:
            return
        self._done = True
        try:
            self.stream.close()
        except OSError:  # the data that could not be flushed is thrown away with the file
            pass
        try:
            os.unlink(self._tmp)
        except OSError:
            pass

