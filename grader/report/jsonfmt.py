"""The JSON report: one document for the whole run, written as the reports arrive.

Schema (stable; fields are only ever added)::

    {"grader": {"version"}, "suite": {"name", "max_score", "fingerprint"},
     "run": {"discovered", "shard"},
     "submissions": [{"path", "passed", "score", "max_score", "duration_s", "worker_status",
                      "error", "checks": [{"id", "kind", "title", "passed", "outcome", "points",
                      "max_points", "summary", "cases": [...]}],
                      "diagnoses": [{"code", "name", "severity", "message", "fix", "evidence",
                      "checks", "location"}], "output": {...},
                      "sandbox": [{"name", "active", "detail"}],
                      "isolated": {"network", "filesystem", "process"},
                      "extra": {"index", ...}}],
     "summary": {"total", "passed", "failed", "score", "max_score", "diagnoses": {name: count}}}

``run.discovered`` is how many submissions the run found, ``run.shard`` the ``I/N`` of
``--shard`` (null without), and each submission's ``extra.index`` its place among the
submissions found (0-based): what ``grade merge`` checks and orders by (grader.report.jsonload).

The document is written piece by piece, each submission's part as its report arrives (laid out
exactly as ``json.dumps(document, indent=2)`` would lay out the whole), and the summary from
running totals at the end: nothing of a report is kept once its part is written.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections import Counter
from typing import IO, Any

import numpy as np

from grader import __version__
from grader.checks.base import CaseResult, CheckResult
from grader.compare import Mismatch
from grader.diagnosis.model import Diagnosis, Location
from grader.observation import CapturedOutput
from grader.report import untrusted
from grader.report.audience import shown_to
from grader.report.base import RunInfo
from grader.report.model import Report
from grader.sandbox.isolation import GUARANTEES, Layer, missing_guarantees


def _plain(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN and infinities to strings (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def check_dict(check: CheckResult) -> dict[str, Any]:
    return {
        "id": check.id,
        "kind": check.kind,
        "title": check.title,
        "passed": check.passed,
        "outcome": check.outcome,
        "points": check.points,
        "max_points": check.max_points,
        "summary": check.summary,
        "figures": _plain(check.figures),
        "cases": [
            {"case": c.case, "probe": c.probe, "what": c.what, "passed": c.passed, "summary": c.summary, "mismatch": c.mismatch.as_dict() if c.mismatch else None}
            | _matrices(c)
            for c in check.cases
        ],
    }


# A failed weights comparison keeps a corner of both matrices (the first batch element, at most
# HEATMAP_SIZE square): enough for the terminal heat map of a report served from the cache.
HEATMAP_SIZE = 12


def _corner(array: np.ndarray) -> np.ndarray:
    return array[(0,) * (array.ndim - 2)][:HEATMAP_SIZE, :HEATMAP_SIZE]


def _matrices(case: CaseResult) -> dict[str, Any]:
    if case.what != "weights" or case.passed or case.actual is None or case.expected is None or case.actual.ndim < 2:
        return {}
    if case.actual.shape != case.expected.shape or case.actual.dtype.kind not in "fiu":
        return {}
    leading = case.actual.ndim - 2  # kept, so a batched case still ranks as one in the heat map
    return {"matrices": {"actual": _plain(_corner(case.actual).astype(float).tolist()), "expected": _plain(_corner(case.expected).tolist()), "leading_axes": leading}}


def _matrix(data: Any) -> np.ndarray:
    rows = [[_number(v) for v in row] for row in data] if isinstance(data, list) and all(isinstance(r, list) for r in data) else None
    if not rows or len({len(r) for r in rows}) != 1 or len(rows) > HEATMAP_SIZE or len(rows[0]) > HEATMAP_SIZE:
        raise ValueError("bad matrix")
    return np.array(rows, dtype=np.float64)


def diagnosis_dict(d: Diagnosis) -> dict[str, Any]:
    location = None
    if d.location is not None:
        location = {"file": d.location.file, "line": d.location.line, "code": d.location.code, "cell": d.location.cell, "observed": d.location.observed}
    return {
        "code": d.code,
        "name": d.name,
        "severity": d.severity,
        "message": d.message,
        "fix": d.fix,
        "evidence": _plain(d.evidence),
        "checks": list(d.checks),
        "location": location,
    }


def report_dict(report: Report) -> dict[str, Any]:
    missing = missing_guarantees(report.sandbox)
    return {
        "path": report.path,
        "function": report.function,
        "passed": report.passed,
        "score": report.score,
        "max_score": report.max_score,
        "duration_s": round(report.duration_s, 4),
        "worker_status": report.worker_status,
        "error": report.error,
        "checks": [check_dict(c) for c in report.checks],
        "diagnoses": [diagnosis_dict(d) for d in report.diagnoses],
        "output": {"text": report.output.text, "total_bytes": report.output.total_bytes, "truncated_bytes": report.output.truncated_bytes},
        "sandbox": [{"name": layer.name, "active": layer.active, "detail": layer.detail} for layer in report.sandbox],
        "isolated": {guarantee: guarantee not in missing for guarantee in GUARANTEES},
        **({"extra": _plain(report.extra)} if report.extra else {}),
    }


class Totals:
    """The summary of a run, counted as the reports go by."""

    def __init__(self) -> None:
        self.total = self.passed = 0
        self.score = self.max_score = 0.0
        self.names: Counter[str] = Counter()

    def add(self, report: Report) -> None:
        self.total += 1
        self.passed += report.passed
        self.score += report.score
        self.max_score += report.max_score
        self.names.update(d.name for d in report.diagnoses)

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.total - self.passed,
            "score": self.score,
            "max_score": self.max_score,
            "diagnoses": dict(self.names.most_common()),
        }


def summary_dict(reports: list[Report]) -> dict[str, Any]:
    totals = Totals()
    for report in reports:
        totals.add(report)
    return totals.as_dict()


def header_dict(info: RunInfo) -> dict[str, Any]:
    """What a document says before its submissions: who wrote it, for which suite and run."""
    return {
        "grader": {"version": __version__},
        "suite": {"name": info.suite_name, "max_score": info.max_score, "fingerprint": info.suite_fingerprint},
        "run": {"discovered": info.discovered, "shard": info.shard},
    }


def _dumps(value: Any, depth: int) -> str:
    """``value`` as ``json.dumps(..., indent=2)`` lays it out ``depth`` levels deep.

    allow_nan=False: _plain wrote NaN and infinities as text, and JSON has no other form of them.
    The values stay exactly the submission's (this is the data); ensure_ascii writes every
    control character, and a lone surrogate, as a \\u escape, so no string holds a raw line
    break and indenting every line is exact; json_document leaves no workflow command in a line
    a CI runner reads."""
    text = json.dumps(value, indent=2, allow_nan=False, ensure_ascii=True)
    return untrusted.json_document(text.replace("\n", "\n" + "  " * depth))


class _LastLaidOut:
    """The last submission laid out, known by a weak reference to the report it came from: a run
    that writes JSON to stdout and to a file hands each report to both in turn, and json's
    indented layout (pure Python) costs about a millisecond a report, so the second gets the
    first's text. Weak: the report is dropped once its sinks had it, as before."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.report: weakref.ref[Report] | None = None
        self.audience = ""
        self.text = ""

    def text_of(self, report: Report, audience: str) -> str:
        with self.lock:
            if self.report is not None and self.report() is report and self.audience == audience:
                return self.text
        text = _dumps(report_dict(shown_to(report, audience)), 2)  # --audience candidate: nothing of the suite's answers
        with self.lock:
            self.report, self.audience, self.text = weakref.ref(report), audience, text
        return text


_LAST = _LastLaidOut()


class JsonReporter:
    """Writes the document as it goes: the header and each submission as its report arrives,
    the summary at the end."""

    streaming = False

    def __init__(self, stream: IO[str], info: RunInfo) -> None:
        self.stream = stream
        self.info = info
        self.totals = Totals()

    def _head(self) -> None:
        self.stream.write("{\n")
        for key, value in header_dict(self.info).items():
            self.stream.write(f"  {json.dumps(key)}: {_dumps(value, 1)},\n")
        self.stream.write('  "submissions": [')

    def add(self, report: Report) -> None:
        if self.totals.total == 0:
            self._head()
        self.stream.write(("\n" if self.totals.total == 0 else ",\n") + "    " + _LAST.text_of(report, self.info.audience))
        self.totals.add(shown_to(report, self.info.audience))

    def finish(self) -> None:
        if self.totals.total == 0:
            self._head()
            self.stream.write("],\n")
        else:
            self.stream.write("\n  ],\n")
        self.stream.write(f'  "summary": {_dumps(self.totals.as_dict(), 1)}\n}}\n')


# --------------------------------------------------------------------------------------------
# Reading a report back (the result cache stores report_dict output). The data is validated as
# it is read: a cache entry is a file on disk, and a damaged or edited one must be refused, not
# trusted. Any problem raises ValueError.


def _get(data: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise ValueError(f"missing field {key!r}")
    value = data[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ValueError(f"field {key!r} has the wrong type")
    if not isinstance(value, kind):
        raise ValueError(f"field {key!r} has the wrong type")
    return value


def _number(value: Any) -> float:
    """A float written by _plain: a number, or the text of NaN or an infinity."""
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("not a number")
    return float(value)


def _mismatch_from_dict(data: Any) -> Mismatch | None:
    if data is None:
        return None
    index = _get(data, "worst_index", list)
    if not all(type(i) is int for i in index):
        raise ValueError("bad worst_index")
    return Mismatch(
        mismatched=_get(data, "mismatched", int),
        total=_get(data, "total", int),
        max_abs=_number(data.get("max_abs_diff")),
        max_rel=_number(data.get("max_rel_diff")),
        worst_index=tuple(index),
        actual=_number(data.get("actual")),
        expected=_number(data.get("expected")),
        nonfinite=_get(data, "nonfinite", int),
    )


def _matrices_from_dict(data: Any) -> dict[str, np.ndarray]:
    if data is None:
        return {}
    actual, expected = _matrix(_get(data, "actual", list)), _matrix(_get(data, "expected", list))
    leading = _get(data, "leading_axes", int)
    if actual.shape != expected.shape or not 0 <= leading <= 6:
        raise ValueError("bad matrices")
    shape = (1,) * leading + actual.shape
    return {"actual": actual.reshape(shape), "expected": expected.reshape(shape)}


def _check_from_dict(data: Any) -> CheckResult:
    outcome = _get(data, "outcome", str)
    if outcome not in ("passed", "failed", "skipped", "error"):
        raise ValueError(f"bad outcome {outcome[:20]!r}")
    cases = tuple(
        CaseResult(
            case=_get(c, "case", str),
            probe=_get(c, "probe", str),
            what=_get(c, "what", str),
            passed=_get(c, "passed", bool),
            summary=_get(c, "summary", str),
            mismatch=_mismatch_from_dict(c.get("mismatch")),
            **_matrices_from_dict(c.get("matrices")),
        )
        for c in _get(data, "cases", list)
    )
    return CheckResult(
        id=_get(data, "id", str),
        kind=_get(data, "kind", str),
        title=_get(data, "title", str),
        outcome=outcome,
        points=_get(data, "points", float),
        max_points=_get(data, "max_points", float),
        summary=_get(data, "summary", str),
        cases=cases,
        figures=_get(data, "figures", dict),
    )


def _diagnosis_from_dict(data: Any) -> Diagnosis:
    severity = _get(data, "severity", str)
    if severity not in ("error", "warning"):
        raise ValueError(f"bad severity {severity[:20]!r}")
    location = None
    if _get(data, "location", (dict, type(None))) is not None:
        where = data["location"]
        cell = _get(where, "cell", (int, type(None)))
        location = Location(file=_get(where, "file", str), line=_get(where, "line", int), code=_get(where, "code", str), cell=cell, observed=where.get("observed", False) is not False)
    checks = _get(data, "checks", list)
    if not all(isinstance(c, str) for c in checks):
        raise ValueError("bad checks")
    return Diagnosis(
        code=_get(data, "code", str),
        name=_get(data, "name", str),
        severity=severity,
        message=_get(data, "message", str),
        fix=_get(data, "fix", str),
        evidence=_get(data, "evidence", dict),
        checks=tuple(checks),
        location=location,
    )


def report_from_dict(data: Any, suite_name: str) -> Report:
    """The Report that ``report_dict`` wrote (array values of the comparisons are not kept).
    Raises ValueError when ``data`` is not such a dict."""
    output = _get(data, "output", dict)
    total, truncated = _get(output, "total_bytes", int), _get(output, "truncated_bytes", int)
    sandbox = tuple(Layer(_get(s, "name", str), _get(s, "active", bool), _get(s, "detail", str)) for s in _get(data, "sandbox", list))
    if total < 0 or not 0 <= truncated <= total:
        raise ValueError("bad output fields")
    extra = data.get("extra", {})
    if not isinstance(extra, dict):
        raise ValueError("bad extra")
    report = Report(
        path=_get(data, "path", str),
        function=_get(data, "function", str),
        suite=suite_name,
        passed=_get(data, "passed", bool),
        score=_get(data, "score", float),
        max_score=_get(data, "max_score", float),
        checks=tuple(_check_from_dict(c) for c in _get(data, "checks", list)),
        diagnoses=tuple(_diagnosis_from_dict(d) for d in _get(data, "diagnoses", list)),
        output=CapturedOutput(_get(output, "text", str), total, total - truncated),
        duration_s=_get(data, "duration_s", float),
        worker_status=_get(data, "worker_status", str),
        sandbox=sandbox,
        error=_get(data, "error", (str, type(None))),
        extra=dict(extra),
    )
    _consistent(report)
    return report


def _consistent(report: Report) -> None:
    """A report as the grader writes it: its score the sum of its checks' points and within its
    maximum, and passed only with every check passed and no error-level diagnosis. A report
    edited by hand (passed made true, a score raised) is refused, not merged into a gradebook."""
    if not (math.isfinite(report.score) and math.isfinite(report.max_score)) or not 0 <= report.score <= report.max_score:
        raise ValueError(f"score {report.score:g} outside 0..{report.max_score:g}")
    if report.checks and not math.isclose(report.score, sum(c.points for c in report.checks), abs_tol=1e-9):
        raise ValueError("the score is not the sum of the checks' points")
    if report.passed and (report.error is not None or any(not c.passed for c in report.checks) or any(d.severity == "error" for d in report.diagnoses)):
        raise ValueError("passed, with a check failed or a bug named")
