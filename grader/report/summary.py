"""What a run keeps of each submission once its report went to every sink, and the figures over
the whole run drawn from it (the end-of-batch table, the Markdown summary, the gradebook).

A batch of tens of thousands of submissions must not keep tens of thousands of Reports alive:
each Report (with the arrays behind its checks) goes to the reporters as soon as it is known and
is then dropped; only its :class:`Row`, a few hundred bytes, stays until the end.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, TypeVar

from grader.report.model import Report


def candidate_of(report: Report) -> str:
    """Who a report is about: a checkout's folder name, else the submission file's stem."""
    label = report.extra.get("candidate")
    if isinstance(label, str) and label:
        return PurePath(label).name or label
    return PurePath(report.path).stem or report.path


@dataclass(frozen=True, slots=True)
class CheckRow:
    """One check's result in a Row: what a gradebook column needs."""

    id: str
    title: str
    passed: bool
    points: float
    max_points: float


# Most submissions of a batch share their check results (every correct one has the same), so a
# Row takes the CheckRows, and the tuple of them, from here: a batch of 50,000 then keeps a few
# hundred distinct ones, not 600,000. Bounded: past the cap new values are simply not shared.
_SHARED: dict[Any, Any] = {}
_SHARED_CAP = 100_000
T = TypeVar("T")


def _shared(value: T) -> T:
    if len(_SHARED) >= _SHARED_CAP:
        return _SHARED.get(value, value)
    return _SHARED.setdefault(value, value)


@dataclass(frozen=True, slots=True)
class Row:
    """The little a run keeps of one graded submission."""

    candidate: str
    path: str
    verdict: str  # "passed", "failed", "not graded"
    score: float
    max_score: float
    bugs: tuple[tuple[str, str], ...]  # (code, name) of each error-severity diagnosis
    diagnoses: tuple[tuple[str, str], ...]  # (code, name) of every diagnosis, warnings included
    checks: tuple[CheckRow, ...]
    duration_s: float
    cached: bool
    error: str | None

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    @classmethod
    def of(cls, report: Report) -> Row:
        verdict = "passed" if report.passed else ("not graded" if report.error is not None else "failed")
        return cls(
            candidate=candidate_of(report),
            path=report.path,
            verdict=verdict,
            score=report.score,
            max_score=report.max_score,
            bugs=tuple((d.code, d.name) for d in report.errors),
            diagnoses=tuple((d.code, d.name) for d in report.diagnoses),
            checks=_shared(tuple(_shared(CheckRow(c.id, c.title, c.passed, c.points, c.max_points)) for c in report.checks)),
            duration_s=report.duration_s,
            cached=bool(report.extra.get("cached")),
            error=report.error,
        )


@dataclass(frozen=True)
class RunSummary:
    """The end of a batch in numbers: verdicts, frequent diagnoses, slowest submissions."""

    total: int
    passed: int
    failed: int  # failed a check
    errors: int  # nothing could be graded (no submission file, grader failure)
    cached: int
    diagnoses: tuple[tuple[str, str, int], ...]  # (code, name, count), most frequent first
    slowest: tuple[tuple[str, float], ...]  # (path, seconds), slowest first

    @classmethod
    def of(cls, reports: "list[Report] | list[Row]", top: int = 5) -> RunSummary:
        rows = [r if isinstance(r, Row) else Row.of(r) for r in reports]
        names: Counter[tuple[str, str]] = Counter(pair for r in rows for pair in r.diagnoses)
        timed = sorted((r for r in rows if not r.cached and r.error is None), key=lambda r: -r.duration_s)
        return cls(
            total=len(rows),
            passed=sum(r.passed for r in rows),
            failed=sum(r.verdict == "failed" for r in rows),
            errors=sum(r.error is not None for r in rows),
            cached=sum(r.cached for r in rows),
            diagnoses=tuple((code, name, n) for (code, name), n in names.most_common(top)),
            slowest=tuple((r.path, r.duration_s) for r in timed[:top]),
        )
