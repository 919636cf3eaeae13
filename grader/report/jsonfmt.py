"""The JSON report: one document for the whole run.

Schema (stable; fields are only ever added)::

    {"grader": {"version"}, "suite": {"name", "max_score"},
     "submissions": [{"path", "passed", "score", "max_score", "duration_s", "worker_status",
                      "error", "checks": [{"id", "kind", "title", "passed", "outcome", "points",
                      "max_points", "summary", "cases": [...]}],
                      "diagnoses": [{"code", "name", "severity", "message", "fix", "evidence",
                      "checks", "location"}], "output": {...},
                      "sandbox": [{"name", "active", "detail"}],
                      "isolated": {"network", "filesystem", "process"}}],
     "summary": {"total", "passed", "failed", "score", "max_score", "diagnoses": {name: count}}}
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import IO, Any

import numpy as np

from grader import __version__
from grader.checks.base import CheckResult
from grader.diagnosis.model import Diagnosis
from grader.report.model import Report
from grader.sandbox.isolation import GUARANTEES, missing_guarantees


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
            for c in check.cases
        ],
    }


def diagnosis_dict(d: Diagnosis) -> dict[str, Any]:
    location = None
    if d.location is not None:
        location = {"file": d.location.file, "line": d.location.line, "code": d.location.code, "cell": d.location.cell}
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


def summary_dict(reports: list[Report]) -> dict[str, Any]:
    names = Counter(d.name for r in reports for d in r.diagnoses)
    return {
        "total": len(reports),
        "passed": sum(r.passed for r in reports),
        "failed": sum(not r.passed for r in reports),
        "score": sum(r.score for r in reports),
        "max_score": sum(r.max_score for r in reports),
        "diagnoses": dict(names.most_common()),
    }


def document(reports: list[Report], suite_name: str, max_score: float) -> dict[str, Any]:
    return {
        "grader": {"version": __version__},
        "suite": {"name": suite_name, "max_score": max_score},
        "submissions": [report_dict(r) for r in reports],
        "summary": summary_dict(reports),
    }


class JsonReporter:
    """Collects every report and writes one document at the end."""

    def __init__(self, stream: IO[str], suite_name: str, max_score: float) -> None:
        self.stream = stream
        self.suite_name = suite_name
        self.max_score = max_score
        self.reports: list[Report] = []

    def add(self, report: Report) -> None:
        self.reports.append(report)

    def finish(self) -> None:
        json.dump(document(self.reports, self.suite_name, self.max_score), self.stream, indent=2, allow_nan=False)
        self.stream.write("\n")
