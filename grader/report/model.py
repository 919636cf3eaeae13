"""The Report: everything known about one graded submission, with no rendering code."""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.checks.base import CheckResult
from grader.diagnosis.model import Diagnosis
from grader.observation import CapturedOutput
from grader.sandbox.isolation import Layer


# The key in a report's ``extra`` of a submission not graded because of the grader's environment
# ("environment") or because an interrupted run never came to it (UNREACHED).
NOT_GRADED = "not_graded"
UNREACHED = "interrupted"


@dataclass(frozen=True)
class Report:
    """Everything known about one graded submission, with no rendering code."""

    path: str
    function: str
    suite: str
    passed: bool
    score: float
    max_score: float
    checks: tuple[CheckResult, ...]
    diagnoses: tuple[Diagnosis, ...]
    output: CapturedOutput
    duration_s: float
    worker_status: str
    sandbox: tuple[Layer, ...] = ()  # the worker's isolation layers, as it reported them
    error: str | None = None  # a per-submission problem found before grading (no file to grade, ...)
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[Diagnosis, ...]:
        return tuple(d for d in self.diagnoses if d.severity == "error")

    @property
    def warnings(self) -> tuple[Diagnosis, ...]:
        return tuple(d for d in self.diagnoses if d.severity == "warning")
