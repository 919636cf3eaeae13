"""gradients: the gradients of sum(output * G) with respect to Q, K and V match the reference.

For each case the worker called the function once more with inputs that require gradients and
sent back what the framework's autograd gave (grader/sandbox/gradients.py). Each gradient is
compared with the analytic float64 gradient (grader/backward.py) at the suite's tolerances, as
the outputs are. An input whose gradient is ``None``, or all zeros where the reference's is not,
gets no gradient. The check exists for PyTorch and JAX submissions only: for NumPy it is absent,
not failed (``Suite.for_framework``).

:func:`judge_gradients` is shared with the diagnoses (grader/diagnosis/gradients.py), which name
what went wrong from the same verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from grader.attention import attention
from grader.backward import INPUTS, attention_gradients
from grader.checks.base import CaseResult, CheckContext, CheckResult, no_result, summarise
from grader.checks.memo import OwnerMemo
from grader.compare import Mismatch, close, compare
from grader.masks import masked_attention
from grader.observation import ErrorInfo, Observation
from grader.probes import GRADIENTS, Probe, probe_name, tolerance_for
from grader.suite import CheckSpec, Tolerance

# The reference's gradients and output for a run's gradient probes, the same for every submission.
_EXPECTED: OwnerMemo[dict[str, np.ndarray]] = OwnerMemo()

InputVerdict = Literal["ok", "none", "wrong"]
Status = Literal["measured", "raised", "no-gradient", "failed", "no-output", "missing"]


@dataclass(frozen=True)
class InputGradient:
    """One input's gradient against the reference's."""

    input: str  # "Q", "K" or "V"
    verdict: InputVerdict
    summary: str
    how: str = ""  # for "none": "None" (autograd gave nothing) or "zeros"
    mismatch: Mismatch | None = None
    actual: np.ndarray | None = None
    expected: np.ndarray | None = None

    @property
    def norm_ratio(self) -> float | None:
        """|actual| / |expected| (Frobenius norms): how much of the reference's gradient arrives."""
        if self.actual is None or self.expected is None or self.actual.shape != self.expected.shape:
            return None
        reference = float(np.linalg.norm(self.expected))
        with np.errstate(all="ignore"):
            measured = float(np.linalg.norm(self.actual))
        return measured / reference if reference > 0 else None


@dataclass(frozen=True)
class GradientVerdict:
    """What one gradient probe shows: how the call went, and each input's gradient."""

    probe: Probe
    status: Status
    summary: str  # why there are no gradients to compare, when status is not "measured"
    inputs: tuple[InputGradient, ...] = ()
    forward_ok: bool = False  # the output of this very call matches the reference output
    error: ErrorInfo | None = None  # the forward's (raised) or the backward's (failed) exception

    def without(self) -> list[str]:
        """The inputs that get no gradient: every one when none could be computed at all."""
        if self.status in ("raised", "no-gradient", "failed"):
            return list(INPUTS)
        return [g.input for g in self.inputs if g.verdict == "none"]

    def wrong(self) -> list[InputGradient]:
        return [g for g in self.inputs if g.verdict == "wrong"]


def expected(probe: Probe) -> dict[str, np.ndarray]:
    """The reference's gradients ("Q", "K", "V") and output ("output") for a gradient probe."""

    def compute() -> dict[str, np.ndarray]:
        assert probe.G is not None
        out = attention(probe.Q, probe.K, probe.V) if probe.mask is None else masked_attention(probe.Q, probe.K, probe.V, probe.mask)
        return {**attention_gradients(probe.Q, probe.K, probe.V, probe.G, probe.mask), "output": out}

    return _EXPECTED.get(probe, ("gradients",), compute)


def _input(label: str, actual: np.ndarray | None, none: bool, reference: np.ndarray, tolerance: Tolerance) -> InputGradient:
    if none:
        return InputGradient(label, "none", f"d{label} is None: no gradient reaches {label}", how="None", expected=reference)
    if actual is None:
        return InputGradient(label, "wrong", f"d{label} is not a numeric array", expected=reference)
    if actual.shape != reference.shape:
        return InputGradient(label, "wrong", f"d{label} has shape {tuple(actual.shape)}, expected {reference.shape}", actual=actual, expected=reference)
    if actual.dtype.kind not in "fciub":
        return InputGradient(label, "wrong", f"d{label} has dtype {actual.dtype}", actual=actual, expected=reference)
    if not np.any(actual) and np.any(reference):
        return InputGradient(label, "none", f"d{label} is all zeros: no gradient reaches {label}", how="zeros", actual=actual, expected=reference)
    mismatch = compare(actual, reference, tolerance)
    return InputGradient(label, "ok" if mismatch.ok else "wrong", f"d{label}: {mismatch.describe()}", mismatch=mismatch, actual=actual, expected=reference)


def judge_gradients(probe: Probe, obs: Observation | None, tolerance: Tolerance, missing: str = "no result") -> GradientVerdict:
    """The verdict on one gradient probe's observation (``missing``: why there is none)."""
    tolerance = tolerance_for(probe, tolerance)
    if obs is None:
        return GradientVerdict(probe, "missing", missing)
    if obs.status == "raised":
        assert obs.error is not None
        where = f" ({obs.error.where})" if obs.error.line else ""
        return GradientVerdict(probe, "raised", f"raised {obs.error.short}{where} with inputs that require gradients", error=obs.error)
    want = expected(probe)
    output = obs.value.array if obs.value is not None else None
    forward_ok = output is not None and output.dtype.kind in "fiu" and close(output, want["output"], tolerance)
    grads = obs.gradients
    if grads is None:
        return GradientVerdict(probe, "missing", "the worker sent no gradients", forward_ok=forward_ok)
    if grads.status == "no-output":
        return GradientVerdict(probe, "no-output", grads.reason or "nothing of the output's shape to differentiate", forward_ok=forward_ok)
    if grads.status == "no-gradient":
        return GradientVerdict(probe, "no-gradient", f"no gradient reaches Q, K or V: {grads.reason}", forward_ok=forward_ok)
    if grads.status == "failed":
        error = grads.error or ErrorInfo("Exception", "")
        where = f" ({error.where})" if error.line else ""
        return GradientVerdict(probe, "failed", f"the backward raised {error.short}{where}", forward_ok=forward_ok, error=error)
    inputs = tuple(_input(label, grads.arrays.get(label), label in grads.none, want[label], tolerance) for label in INPUTS)
    return GradientVerdict(probe, "measured", "", inputs, forward_ok)


def gradient_probes(probes: dict[str, Probe]) -> list[Probe]:
    return [p for p in probes.values() if p.gradients]


class GradientsCheck:
    kind = GRADIENTS

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        cases: list[CaseResult] = []
        for case in spec.cases:
            name = probe_name(case, GRADIENTS)
            probe = ctx.probes.get(name)
            if probe is None:
                cases.append(CaseResult(case, name, "gradients", False, "no gradient probe was built for this run"))
                continue
            verdict = judge_gradients(probe, ctx.run.get(name), ctx.suite.tolerance, no_result(ctx))
            if verdict.status != "measured":
                cases.append(CaseResult(case, name, "gradients", False, verdict.summary))
                continue
            for g in verdict.inputs:
                cases.append(CaseResult(case, name, f"gradient of {g.input}", g.verdict == "ok", g.summary, g.mismatch, actual=g.actual, expected=g.expected))
        return summarise(spec, cases)
