"""Reading JSON reports back, for ``grade merge``: the shards of one run put back together.

Every file is read as a stream, one submission at a time (a shard of a large batch is hundreds
of megabytes of JSON; parsed whole it would cost several times that): the document's top-level
members are parsed as they come, and the ``submissions`` array element by element
(``json.JSONDecoder.raw_decode`` on a window of the file). Each submission becomes a Report
again through ``report_from_dict``, which validates it.

Merging reads every file twice. The first pass checks everything before anything is written, so
that a refusal leaves no output: each file is a complete JSON report of this grader (not
truncated, nothing after it), its submissions valid and in the order it wrote them, and the
files agree with each other: the same grader version (this one's), the same suite (name and
fingerprint), the same run (as many submissions found), no submission in two of them. The second
pass reads the files side by side and hands out their reports in the order one run over all of
them would give: by each submission's place among those found (``extra.index``), a merge of
sorted streams. Memory stays flat however large the files are.

What a report file does not hold cannot come back: a comparison's arrays are kept only as the
corner of a failed weight matrix that the terminal's heat map shows (see jsonfmt), so every
format a merge writes (text, JSON, JUnit, CSV, Markdown, Gradescope, HTML, annotations) shows
what a run shows, heat maps included; timings are those of the shards, rounded to 0.1 ms.

Every problem is a UsageError (exit 2) of one line naming the file.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from grader import __version__
from grader.errors import UsageError
from grader.report.jsonfmt import report_from_dict
from grader.report.model import Report
from grader.shard import Shard

INDEX = "index"  # the key, in a report's extra, of its place among the submissions of the run
CHUNK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")


class Malformed(Exception):
    """The file is not what it should be; str() says what, and where."""


class JsonStream:
    """One JSON report read piece by piece: ``submissions()`` yields the elements of its
    ``submissions`` array and fills ``members`` with every other top-level member."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.lines_before = 0  # line breaks in what was dropped from the window
        self.decoder = json.JSONDecoder()
        self.members: dict[str, Any] = {}

    def _line(self, at: int) -> int:
        return self.lines_before + self.buf.count("\n", 0, at) + 1

    def _fill(self) -> bool:
        """More of the file into the window; False at its end."""
        if self.eof:
            return False
        data = self.handle.read(CHUNK)
        if not data:
            self.eof = True
            return False
        if self.pos > CHUNK:  # drop what was read, so the window stays about two chunks wide
            self.lines_before += self.buf.count("\n", 0, self.pos)
            self.buf = self.buf[self.pos :]
            self.pos = 0
        self.buf += data
        return True

    def _peek(self) -> str:
        while True:
            match = _SPACE.match(self.buf, self.pos)
            assert match is not None
            self.pos = match.end()
            if self.pos < len(self.buf) or not self._fill():
                return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def _expect(self, allowed: str, what: str) -> str:
        char = self._peek()
        if not char:
            raise Malformed("ends before the document does (a truncated file?)")
        if char not in allowed:
            raise Malformed(f"not valid JSON at line {self._line(self.pos)}: expected {what}")
        self.pos += 1
        return char

    def _value(self) -> Any:
        if not self._peek():
            raise Malformed("ends before the document does (a truncated file?)")
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._fill():
                    continue  # the value goes on in the next chunk
                # At the end of the last line, or a string never closed: the file was cut short.
                if "Unterminated" in exc.msg or (exc.pos >= len(self.buf) - 16 and "\n" not in self.buf[exc.pos :]):
                    raise Malformed("ends before the document does (a truncated file?)") from None
                raise Malformed(f"not valid JSON at line {self._line(exc.pos)}: {exc.msg}") from None
            except RecursionError:
                raise Malformed(f"not valid JSON at line {self._line(self.pos)}: nested too deeply") from None
            if end == len(self.buf) and self._fill():
                continue  # a number or a word may go on in the next chunk
            self.pos = end
            return value

    def submissions(self) -> Iterator[Any]:
        if not self._peek():
            raise Malformed("is empty: no JSON report in it")
        if self._peek() != "{":
            raise Malformed("not a grader report (a JSON report of `grade --format json` is one JSON object)")
        self.pos += 1
        seen = False
        if self._peek() == "}":
            self.pos += 1
        else:
            while True:
                key = self._value()
                if not isinstance(key, str):
                    raise Malformed(f"not valid JSON at line {self._line(self.pos)}: expected a member name")
                self._expect(":", "':'")
                if key == "submissions":
                    if seen:
                        raise Malformed("not a grader report: two 'submissions' members")
                    seen = True
                    self._expect("[", "the list of submissions")
                    if self._peek() == "]":
                        self.pos += 1
                    else:
                        while True:
                            yield self._value()
                            if self._expect(",]", "',' or ']'") == "]":
                                break
                else:
                    self.members[key] = self._value()
                if self._expect(",}", "',' or '}'") == "}":
                    break
        if self._peek():
            raise Malformed(f"not valid JSON at line {self._line(self.pos)}: more data after the document")
        if not seen:
            raise Malformed("not a grader report: no 'submissions' in it")


@dataclass(frozen=True)
class Header:
    """What a report says of the run that wrote it."""

    version: str
    suite_name: str
    max_score: float
    fingerprint: str
    discovered: int
    shard: str | None

    @classmethod
    def of(cls, members: dict[str, Any]) -> Header:
        grader, suite, run = members.get("grader"), members.get("suite"), members.get("run")
        if not isinstance(grader, dict) or not isinstance(grader.get("version"), str):
            raise Malformed("not a grader report (no grader version in it)")
        if not isinstance(suite, dict) or not isinstance(suite.get("name"), str) or not _is_number(suite.get("max_score")):
            raise Malformed("not a grader report (no suite in it)")
        if not isinstance(run, dict) or not _is_count(run.get("discovered")) or not isinstance(run.get("shard"), (str, type(None))):
            raise Malformed(f"no run header (written by grader {grader['version']}, which `grade merge` cannot read)")
        if not isinstance(suite.get("fingerprint"), str):
            raise Malformed("no suite fingerprint in it (not written by `grade`)")
        try:
            if run["shard"] is not None:
                Shard.parse(run["shard"])
        except UsageError:
            raise Malformed(f"not a grader report (its shard {run['shard'][:20]!r} is not I/N)") from None
        return cls(grader["version"], suite["name"], float(suite["max_score"]), suite["fingerprint"], run["discovered"], run["shard"])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _index_of(data: Any) -> int:
    extra = data.get("extra") if isinstance(data, dict) else None
    index = extra.get(INDEX) if isinstance(extra, dict) else None
    if not _is_count(index):
        raise ValueError("no submission index")
    assert isinstance(index, int)
    return index


@dataclass
class _File:
    path: Path
    header: Header | None = None  # known once the file was read

    def _open(self) -> IO[str]:
        try:
            return open(self.path, encoding="utf-8", newline="")
        except IsADirectoryError:
            raise UsageError(f"{self.path}: is a folder, not a JSON report") from None
        except OSError as exc:
            raise UsageError(f"{self.path}: cannot read: {exc.strerror or exc}") from None

    def read(self, suite_name: str) -> Iterator[tuple[int, Any, Report]]:
        """(index, path, report) of each submission, in the file's order, checked; the header
        once the whole file was read."""
        with self._open() as handle:
            stream = JsonStream(handle)
            previous = -1
            try:
                for number, data in enumerate(stream.submissions(), start=1):
                    try:
                        index = _index_of(data)
                        report = report_from_dict(data, suite_name)
                    except (ValueError, RecursionError) as exc:
                        raise Malformed(f"submission {number} is not a valid report: {exc}") from None
                    if index <= previous:
                        raise Malformed(f"submission {number} is out of order (index {index} after {previous}): not as `grade` wrote it")
                    previous = index
                    yield index, report.path, report
                header = Header.of(stream.members)
            except Malformed as exc:
                raise UsageError(f"{self.path}: {exc}") from None
            except UnicodeDecodeError:
                raise UsageError(f"{self.path}: not a grader report (not UTF-8 text)") from None
            except OSError as exc:
                raise UsageError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if previous >= header.discovered:
            raise UsageError(f"{self.path}: submission index {previous} is past the {header.discovered} submissions of its run")
        self.header = header


@dataclass
class Merge:
    """The reports of several files, checked to be shards of one run (see the module's docstring)."""

    files: list[_File]
    header: Header
    total: int  # submissions in all the files
    shards: list[str] = field(default_factory=list)  # the "I/N" of each file graded with --shard

    @classmethod
    def open(cls, paths: list[Path]) -> Merge:
        """Reads and checks every file. Raises UsageError (one line) for the first problem."""
        files: list[_File] = []
        for path in paths:
            for earlier in files:
                if _same_file(earlier.path, path):
                    raise UsageError(f"{path}: given twice")
            files.append(_File(path))
        holder: dict[int, Path] = {}  # index -> the file that holds it
        for file in files:
            held = [(index, sub_path) for index, sub_path, _ in file.read("")]
            _agree(files[0], file)  # another run's file is refused as such, not for its overlaps
            for index, sub_path in held:
                if index in holder:
                    raise UsageError(f"{holder[index]} and {file.path} both hold the submission {sub_path} (one submission in two shards)")
                holder[index] = file.path
        header = files[0].header
        assert header is not None
        if header.version != __version__:
            raise UsageError(f"{files[0].path}: written by grader {header.version}; this is grader {__version__}: merge with the version that graded")
        shards = [f.header.shard for f in files if f.header is not None and f.header.shard is not None]
        return cls(files, header, len(holder), shards)

    def reports(self) -> Iterator[Report]:
        """Every report of every file, in the order of one run over them all."""
        streams = [((index, report) for index, _, report in file.read(self.header.suite_name)) for file in self.files]
        for _index, report in heapq.merge(*streams, key=lambda pair: pair[0]):
            yield report

    @property
    def missing(self) -> str | None:
        """A line saying which submissions of the run are in none of the files, if some are not."""
        if self.total >= self.header.discovered:
            return None
        which = f" (shards {', '.join(sorted(set(self.shards), key=_shard_key))})" if self.shards else ""
        return f"only {self.total} of the {self.header.discovered} submissions of the run are in the reports given{which}: the others are missing"


def _agree(first: _File, other: _File) -> None:
    """Refuses ``other`` when it is not a report of the same run as ``first``."""
    a, b = first.header, other.header
    assert a is not None and b is not None
    if first is other:
        return
    pair = f"{first.path} and {other.path}"
    if a.version != b.version:
        raise UsageError(f"{pair} were written by different grader versions ({a.version} and {b.version})")
    if a.suite_name != b.suite_name:
        raise UsageError(f"{pair} are reports of different suites ('{a.suite_name}' and '{b.suite_name}')")
    if a.fingerprint != b.fingerprint or a.max_score != b.max_score:
        raise UsageError(f"{pair} are reports of different versions of the suite '{a.suite_name}' (their fingerprints differ)")
    if a.shard is not None and b.shard is not None and Shard.parse(a.shard).count != Shard.parse(b.shard).count:
        raise UsageError(f"{pair} are slices of different splits (--shard {a.shard} and {b.shard})")
    if a.discovered != b.discovered:
        raise UsageError(f"{pair} come from different runs ({a.discovered} and {b.discovered} submissions found)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _shard_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("/") if part.isdigit())
