"""Figures over a whole run, shared by the end-of-run table and the markdown summary."""

from __future__ import annotations

from dataclasses import dataclass
from collections import Counter

from grader.report.model import Report


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
    def of(cls, reports: list[Report], top: int = 5) -> RunSummary:
        names: Counter[tuple[str, str]] = Counter((d.code, d.name) for r in reports for d in r.diagnoses)
        timed = sorted((r for r in reports if not r.extra.get("cached") and r.error is None), key=lambda r: -r.duration_s)
        return cls(
            total=len(reports),
            passed=sum(r.passed for r in reports),
            failed=sum(not r.passed and r.error is None for r in reports),
            errors=sum(r.error is not None for r in reports),
            cached=sum(bool(r.extra.get("cached")) for r in reports),
            diagnoses=tuple((code, name, n) for (code, name), n in names.most_common(top)),
            slowest=tuple((r.path, r.duration_s) for r in timed[:top]),
        )
