"""What a check is, and what it returns.

A check takes a context (the suite, the references and the worker's observations) and returns a
frozen result: an outcome, its points and the measured figures. Results hold no rendering code
and no diagnosis: naming the bug is the diagnosis engine's job, which reads the same observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from grader.compare import Mismatch, compare
from grader.observation import Observation, WorkerRun
from grader.probes import Probe
from grader.refdata import ReferenceSet
from grader.suite import CheckSpec, Suite, Tolerance

Outcome = Literal["passed", "failed", "skipped", "error"]


@dataclass(frozen=True)
class CaseResult:
    """One comparison inside a check: one probe of one case."""

    case: str
    probe: str
    what: str  # "output", "weights", "shape"
    passed: bool
    summary: str
    mismatch: Mismatch | None = None
    actual: np.ndarray | None = field(default=None, compare=False, repr=False)
    expected: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one submission: points, summary and the cases behind it."""

    id: str
    kind: str
    title: str
    outcome: Outcome
    points: float
    max_points: float
    summary: str
    cases: tuple[CaseResult, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"


@dataclass(frozen=True)
class CheckContext:
    """What every check reads: the suite, the references, the worker's run and the probes."""

    suite: Suite
    refs: ReferenceSet
    run: WorkerRun
    previous: dict[str, CheckResult]
    probes: dict[str, Probe] = field(default_factory=dict)  # by name: fresh cases exist only here


class Check(Protocol):
    kind: str

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult: ...


def result(spec: CheckSpec, outcome: Outcome, summary: str, cases: tuple[CaseResult, ...] = (), **figures: Any) -> CheckResult:
    return CheckResult(
        id=spec.id,
        kind=spec.kind,
        title=spec.title,
        outcome=outcome,
        points=spec.points if outcome == "passed" else 0.0,
        max_points=spec.points,
        summary=summary,
        cases=cases,
        figures=figures,
    )


def no_result(ctx: CheckContext) -> str:
    run = ctx.run
    reasons = {
        "timeout": "no result: the submission ran out of time",
        "memory": "no result: the submission ran out of memory",
        "crashed": f"no result: {run.detail}",
        "protocol-error": f"no result: {run.detail}",
    }
    return reasons.get(run.status, "no result")


def returned_array(obs: Observation | None, ctx: CheckContext, expected_shape: tuple[int, ...]) -> tuple[np.ndarray | None, str]:
    """The returned array if it is a usable float array of the expected shape, else why not."""
    if obs is None:
        return None, no_result(ctx)
    if obs.status == "raised":
        assert obs.error is not None
        where = f" ({obs.error.where})" if obs.error.line else ""
        return None, f"raised {obs.error.short}{where}"
    value = obs.value
    assert value is not None
    if value.array is None:
        return None, f"returned {value.type}, not an array"
    array = value.array
    if array.shape != expected_shape:
        return None, f"returned shape {tuple(array.shape)}, expected {expected_shape}"
    if array.dtype.kind == "c":
        # Attention of real inputs is real (and the diagnosis names a complex result bad-return):
        # never compared, not even by its modulus, which -1j * out has right.
        return None, f"returned dtype {array.dtype}, expected a real floating-point array"
    if array.dtype.kind != "f":
        return None, f"returned dtype {array.dtype}, expected a floating-point array"
    return array, ""


def compare_probe(ctx: CheckContext, case: str, probe: str, what: str, expected: np.ndarray, tolerance: Tolerance | None = None) -> CaseResult:
    obs = ctx.run.get(probe)
    array, problem = returned_array(obs, ctx, expected.shape)
    if array is None:
        return CaseResult(case, probe, what, False, problem, expected=expected)
    mismatch = compare(array, expected, tolerance or ctx.suite.tolerance)
    return CaseResult(case, probe, what, mismatch.ok, mismatch.describe(), mismatch, actual=array, expected=expected)


def summarise(spec: CheckSpec, cases: list[CaseResult]) -> CheckResult:
    failed = [c for c in cases if not c.passed]
    if not failed:
        return result(spec, "passed", f"{len(cases)} of {len(cases)} comparisons match", tuple(cases))
    first = failed[0]
    summary = f"{len(failed)} of {len(cases)} comparisons fail; {first.case} {first.what}: {first.summary}"
    return result(spec, "failed", summary, tuple(cases))
