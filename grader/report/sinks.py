"""Where the reports of a run go, as each is known, and in which order.

A run makes every sink before the first submission is graded: the reporter on stdout, one
reporter per ``--output FMT=PATH`` writing into its :class:`~grader.report.files.ReportFile`, and
under GitHub Actions the annotations and the job summary. Each finished report is handed to every
sink at once and then dropped: nothing here keeps a Report once every sink had it, and each
reporter keeps at most a ``grader.report.summary.Row`` per submission, or running totals, so a
batch of any size costs little more memory than a small one.

Order. Reports are known in the order the submissions finish; every sink, the terminal report
included, is given them in the order of the submissions, as one run over them all would write
them. One :class:`InOrder` buffer does that for all of them: a report waits there only until the
reports of every submission before it went out. Without the result cache that is a few reports
(the submissions in flight); behind a slow one (a timeout) or behind one submission left to
grade when the others came from the cache it can be many, so past ``InOrder.HELD`` reports the
waiting ones are pickled into an anonymous temporary file and read back when their turn comes.

Finishing is in two steps, because of GitHub's stop-commands (grader.cli): ``finish_stdout``
completes stdout; ``finish`` (after the runner reads workflow commands again) writes the
annotations and the job summary and renames each report file onto its target. A failure or an
interrupt anywhere in between leaves every report file as it was before the run: ``abort``
removes the temporary files (``Sinks`` is a context manager that aborts on an exception).
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import IO, Callable, Iterator, Sequence

from grader.report.base import Reporter, RunInfo
from grader.report.files import OutputSpec, ReportFile, output_error
from grader.report.model import NOT_GRADED, UNREACHED, Report
from grader.report.registry import Format, make_reporter
from grader.report.spool import spool
from grader.report.summary import Row, RunSummary


class InOrder:
    """A reorder buffer: reports come in with their index in the run, in any order, and go out in
    index order, each as soon as every one before it went out."""

    HELD = 32  # reports kept in memory while they wait; the others wait on disk

    def __init__(self, held: int = HELD) -> None:
        self.next = 0  # the index whose turn it is
        self.limit = held
        self.held: dict[int, Report] = {}
        self.spilled: dict[int, tuple[int, int]] = {}  # index -> (offset, length) in the spill file
        self._spill: IO[bytes] | None = None
        self.most_held = 0  # the most reports that waited at once

    def put(self, index: int, report: Report) -> None:
        if index < self.next or index in self.held or index in self.spilled:
            raise ValueError(f"report {index} given twice")
        if len(self.held) < self.limit or index == self.next:
            self.held[index] = report
        else:
            # Our own objects, read back by this process only, from a file no other can open:
            # pickle keeps every field (the arrays too) exactly.
            if self._spill is None:
                self._spill = tempfile.TemporaryFile()
            self._spill.seek(0, 2)
            offset = self._spill.tell()
            pickle.dump(report, self._spill, protocol=pickle.HIGHEST_PROTOCOL)
            self.spilled[index] = (offset, self._spill.tell() - offset)
        self.most_held = max(self.most_held, len(self.held) + len(self.spilled))

    def ready(self) -> Iterator[Report]:
        """Every report whose turn has come, in order (taken out of the buffer as it goes)."""
        while self.next in self.held or self.next in self.spilled:
            report = self._take(self.next)
            self.next += 1
            yield report

    def rest(self) -> Iterator[Report]:
        """Everything still waiting, in order: the end of a run, where an interrupted run leaves
        gaps (submissions never graded)."""
        for index in sorted((*self.held, *self.spilled)):
            self.next = index
            yield from self.ready()

    def _take(self, index: int) -> Report:
        if index in self.held:
            return self.held.pop(index)
        assert self._spill is not None
        offset, length = self.spilled.pop(index)
        self._spill.seek(offset)
        report: Report = pickle.loads(self._spill.read(length))
        if not self.spilled:
            self._spill.truncate(0)  # nothing waits on disk: the file starts over
        return report

    def close(self) -> None:
        self.held.clear()
        self.spilled.clear()
        if self._spill is not None:
            self._spill.close()
            self._spill = None


class Tally:
    """The end-of-batch figures (``RunSummary``) counted as the reports go by: the run keeps
    these few numbers, not a Row per submission."""

    TOP = 5

    def __init__(self) -> None:
        self.total = self.passed = self.failed = self.errors = self.cached = 0
        self.names: Counter[tuple[str, str]] = Counter()
        self.slowest: list[tuple[float, int, str]] = []  # (-seconds, arrival, path), at most TOP

    def add(self, report: Report) -> None:
        row = Row.of(report)
        self.total += 1
        self.passed += row.passed
        self.failed += row.verdict == "failed"
        self.errors += row.error is not None
        self.cached += row.cached
        self.names.update(row.diagnoses)
        if not row.cached and row.error is None:
            self.slowest = sorted([*self.slowest, (-row.duration_s, self.total, row.path)])[: self.TOP]

    def summary(self) -> RunSummary:
        """What ``RunSummary.of`` gives for the same reports."""
        return RunSummary(
            total=self.total, passed=self.passed, failed=self.failed, errors=self.errors, cached=self.cached,
            diagnoses=tuple((code, name, n) for (code, name), n in self.names.most_common(self.TOP)),
            slowest=tuple((path, -seconds) for seconds, _, path in self.slowest),
        )


class _Spooled:
    """A reporter whose output waits in an anonymous temporary file until ``finish``, then is
    copied to ``target``: the GitHub annotations of a text run, written on stdout only once the
    runner reads workflow commands there again."""

    streaming = False

    def __init__(self, make: Callable[[IO[str]], Reporter], target: IO[str]) -> None:
        self.spool = spool()
        self.inner = make(self.spool)
        self.target = target

    def add(self, report: Report) -> None:
        self.inner.add(report)

    def finish(self) -> None:
        self.inner.finish()
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, self.target)
        self.target.flush()
        self.spool.close()


class _JobSummary:
    """The Markdown report appended to GitHub's job summary file (``$GITHUB_STEP_SUMMARY``) at
    the end; a summary that cannot be written is a warning, not a failed run."""

    streaming = False

    def __init__(self, path: Path, info: RunInfo) -> None:
        self.path = path
        self.spool = spool()
        self.inner = make_reporter("markdown", self.spool, info)
        self.warning: str | None = None

    def add(self, report: Report) -> None:
        self.inner.add(report)

    def finish(self) -> None:
        self.inner.finish()
        self.spool.seek(0)
        try:
            with open(self.path, "a", encoding="utf-8", errors="replace") as handle:
                shutil.copyfileobj(self.spool, handle)
        except OSError as exc:
            self.warning = f"{self.path}: cannot write the job summary: {exc.strerror}"
        self.spool.close()


class _FileSink:
    """A reporter writing into a report file: an OSError (a full disk) is an OutputError naming
    the file, and ``finish`` renames the file onto its target."""

    def __init__(self, reporter: Reporter, file: ReportFile) -> None:
        self.reporter = reporter
        self.file = file

    def add(self, report: Report) -> None:
        try:
            self.reporter.add(report)
        except OSError as exc:
            raise output_error(self.file.path, exc) from None

    def finish(self) -> None:
        try:
            self.reporter.finish()
        except OSError as exc:
            raise output_error(self.file.path, exc) from None
        self.file.commit()


def _lists_every_submission(sink: object) -> bool:
    reporter = getattr(sink, "reporter", None) or getattr(sink, "inner", None) or sink  # a wrapper's own
    return bool(getattr(reporter, "lists_every_submission", False))


class Sinks:
    """Every sink of one run (see the module's docstring)."""

    def __init__(self, stdout: Reporter, later: list[Reporter | _FileSink], files: list[ReportFile]) -> None:
        self.stdout = stdout
        self.later = later  # finished by ``finish``, in this order
        self.files = files
        self.order = InOrder()
        self.warnings: list[str] = []  # one line each, for stderr

    def add(self, index: int, report: Report) -> None:
        """``report``, the ``index``-th submission of the run, to every sink in its turn."""
        self.order.put(index, report)
        del report
        self._deliver(self.order.ready())

    def _deliver(self, reports: Iterator[Report]) -> None:
        for report in reports:
            # A submission an interrupted run never came to goes only where every submission
            # has its row (the gradebook, JUnit); elsewhere "interrupted: N of M" says it.
            unreached = report.extra.get(NOT_GRADED) == UNREACHED
            for sink in (self.stdout, *self.later):
                if not unreached or _lists_every_submission(sink):
                    sink.add(report)

    def finish_stdout(self) -> None:
        """Every report still waiting to its sinks, then the end of stdout's report."""
        self._deliver(self.order.rest())
        self.order.close()
        self.stdout.finish()

    def finish(self) -> None:
        """The other sinks finished, each report file renamed onto its target. Raises
        OutputError for a file that cannot be written (then ``abort`` removes the rest)."""
        for sink in self.later:
            sink.finish()
            warning = getattr(sink, "warning", None)
            if warning:
                self.warnings.append(warning)

    def abort(self) -> None:
        """Remove every report file not yet renamed onto its target: nothing half-written stays."""
        self.order.close()
        for file in self.files:
            file.discard()

    def __enter__(self) -> Sinks:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None:
            self.abort()


def open_sinks(fmt: Format, specs: list[OutputSpec], info: RunInfo, stdout: IO[str], stderr: IO[str], *, annotations: bool = False, job_summary: Path | None = None, more: Sequence[Reporter] = ()) -> Sinks:
    """The sinks of a run: ``fmt`` on ``stdout``, a report file per spec (its temporary file made
    now), and with ``annotations`` (GitHub Actions) the annotations: on stdout after the text
    report, on stderr after a document (stdout stays exactly the document), none when ``fmt``
    is already ``github``; ``job_summary``: the Markdown report appended to that file; ``more``:
    other sinks (the feedback folder), finished last. Raises OutputError (and leaves no file)
    when a report file cannot be made."""
    first = make_reporter(fmt, stdout, info)
    later: list[Reporter | _FileSink] = []
    files: list[ReportFile] = []
    if annotations and fmt != "github":
        if fmt == "text":
            later.append(_Spooled(lambda stream: make_reporter("github", stream, info), stdout))
        else:
            later.append(make_reporter("github", stderr, info))
    if job_summary is not None:
        later.append(_JobSummary(job_summary, info))
    try:
        for spec in specs:
            file = ReportFile(spec.path)
            files.append(file)
            later.append(_FileSink(make_reporter(spec.fmt, file.stream, info), file))
    except BaseException:
        for file in files:
            file.discard()
        raise
    later.extend(more)
    return Sinks(first, later, files)
