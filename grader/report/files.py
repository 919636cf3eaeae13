"""Report files: ``--output FMT=PATH`` parsed, checked before grading, written atomically.

A run writes each report file as it goes (:class:`ReportFile`): into a temporary file in the
target's folder, renamed onto the target once complete. A reader never sees half a report, and a
run that fails or is interrupted while writing leaves the previous file (or none) and no
temporary file behind. A link is followed and its target replaced (the link stays a link); a
target that is not a regular file (/dev/null, a FIFO, /dev/stdout) is written through at the end
from an anonymous temporary file, never renamed onto (grader.fsutil.Target).
"""

from __future__ import annotations

from dataclasses import dataclass
import errno
import io
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import IO, TextIO, cast

from grader.errors import OutputError, UsageError
from grader.fsutil import UMASK, Target, check_replaceable, open_through, output_target, write_output
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
    try:
        target = output_target(path)
    except OSError as exc:
        raise output_error(path, exc) from None
    if target.through:
        try:
            mode = os.stat(target.file).st_mode
        except OSError as exc:  # a descriptor that is not open
            raise output_error(path, exc) from None
        if stat.S_ISSOCK(mode) and not target.descriptor:
            raise OutputError(f"{path}: is a socket; cannot be written")
        if not os.access(target.file, os.W_OK):
            raise OutputError(f"{path}: permission denied")
        return
    if target.file.is_dir():
        raise OutputError(f"{path}: is a folder")
    # Where the temporary file goes: beside the file the path (or its link) leads to.
    folder = target.file.parent if path.is_symlink() else (path.parent if str(path.parent) else Path("."))
    if not target.file.parent.is_dir():
        raise OutputError(f"{path}: {_no_folder(folder)}")
    if not os.access(target.file.parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: cannot write in {folder}: permission denied")
    if target.file.exists() and not os.access(target.file, os.W_OK):
        raise OutputError(f"{path}: permission denied")


def _no_folder(folder: Path) -> str:
    """Why ``folder`` (missing or not a folder) cannot hold a file: the first of it and its
    parents that is there and is not a folder is named, else the folder is missing."""
    probe = folder
    while True:
        if probe.exists():
            return f"the folder {folder} does not exist" if probe.is_dir() else f"{probe} is not a folder"
        if probe == probe.parent:
            return f"the folder {folder} does not exist"
        probe = probe.parent


def render_document(fmt: Format, reports: list[Report], info: RunInfo) -> str:
    """The whole report file in ``fmt``, in memory: it is written in one go, atomically."""
    buffer = io.StringIO()
    reporter = make_reporter(fmt, buffer, info)
    for report in reports:
        reporter.add(report)
    reporter.finish()
    return buffer.getvalue()


def write_report_file(path: Path, text: str) -> None:
    """Write atomically (through, for a device: grader.fsutil.write_output). Raises OutputError
    (no file, and no partial file, is left behind)."""
    try:
        write_output(path, text.encode("utf-8", errors="replace"))  # a lone surrogate from a submission
    except OSError as exc:
        raise output_error(path, exc) from None


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENXIO:  # opening a FIFO without blocking (grader.fsutil.open_through)
        return "a FIFO that no process reads; start its reader first"
    return "no space left on the device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))


def output_error(path: Path, exc: OSError) -> OutputError:
    """The one line for a report file that could not be written."""
    return OutputError(f"{path}: {_why(exc)}")


class ReportFile:
    """A report file written while the run goes on: a temporary file beside the target (same
    folder, so same file system: the rename is atomic), ``commit`` renames it onto the target,
    ``discard`` removes it. The target is the file a link leads to; a target written through
    (a device, a FIFO, a descriptor) gets an anonymous temporary file instead, copied into it by
    ``commit``. Every OSError becomes an OutputError naming the path as given."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._done = False
        self._tmp: str | None = None  # the temporary file renamed onto the target
        self._spooled: TextIO | None = None  # or the one copied into a target written through
        self._fifo: int | None = None  # a FIFO's descriptor, open from the start
        try:
            self.target: Target = output_target(path)
        except OSError as exc:
            raise output_error(path, exc) from None
        if self.target.through:
            try:
                # A FIFO is opened now, before grading: one that no process reads is refused at
                # once, not found out at the end, and its reader sees no end of file meanwhile.
                if not self.target.descriptor and stat.S_ISFIFO(os.stat(self.target.file).st_mode):
                    self._fifo = open_through(self.target)
                self._spooled = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace", newline="")
            except OSError as exc:
                if self._fifo is not None:
                    os.close(self._fifo)
                raise output_error(path, exc) from None
            self.stream: IO[str] = self._spooled
            return
        file = self.target.file
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
        except OSError as exc:
            raise output_error(path, exc) from None
        try:
            # mkstemp makes the file private (0600); the report gets the mode any new file would.
            os.fchmod(fd, 0o666 & ~UMASK)
            # Opened by name, so the stream's name is where it lies (see spool); errors="replace":
            # a lone surrogate a reporter let through costs one character, not the file.
            self.stream = open(self._tmp, "w", encoding="utf-8", errors="replace", newline="")
        except OSError as exc:
            os.unlink(self._tmp)
            raise output_error(path, exc) from None
        finally:
            os.close(fd)

    def commit(self) -> None:
        """Flush the file to disk and rename it onto the target, or copy it into a target written
        through. Raises OutputError (the temporary file is removed first)."""
        try:
            self.stream.flush()
            if self._spooled is not None:
                self._write_through(self._spooled)
            elif self._tmp is not None:
                os.fsync(self.stream.fileno())
                self.stream.close()
                check_replaceable(self.target.file)
                os.replace(self._tmp, self.target.file)
        except OSError as exc:
            self.discard()
            raise output_error(self.path, exc) from None
        self._done = True

    def _write_through(self, spooled: TextIO) -> None:
        # The stream was flushed: its bytes are all in the file under it, read from the start.
        spooled.buffer.seek(0)
        fd, self._fifo = (self._fifo if self._fifo is not None else open_through(self.target)), None
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(spooled.buffer, out)
        spooled.close()

    def discard(self) -> None:
        """Remove the temporary file; the target is left as it was. Never raises."""
        if self._done:
            return
        self._done = True
        if self._fifo is not None:
            os.close(self._fifo)
            self._fifo = None
        try:
            self.stream.close()
        except OSError:  # the data that could not be flushed is thrown away with the file
            pass
        if self._tmp is None:
            return
        try:
            os.unlink(self._tmp)
        except OSError:
            pass
