"""stability: on inputs whose scores reach thousands, the weights stay finite and rows sum to 1.

exp() overflows past about 709 in float64, so only a softmax that subtracts the row maximum passes.
A correct float32 implementation differs from the float64 reference by more than the suite's tight
tolerance on inputs this large, so closeness is judged with the looser LARGE_TOLERANCE.
"""

from __future__ import annotations

import numpy as np

from grader.checks.base import CaseResult, CheckContext, CheckResult, returned_array
from grader.checks.values import outputs_and_weights
from grader.compare import compare
from grader.probes import LARGE_TOLERANCE
from grader.suite import CheckSpec

ROW_SUM = 1e-5  # how far from 1 a row of weights may sum (float32 rounding stays far below)


class StabilityCheck:
    kind = "stability"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        return outputs_and_weights(spec, ctx, _judge)


def _judge(ctx: CheckContext, case: str, probe: str, what: str, expected: np.ndarray) -> CaseResult:
    array, problem = returned_array(ctx.run.get(probe), ctx, expected.shape)
    if array is None:
        return CaseResult(case, probe, what, False, problem, expected=expected)
    values = array.astype(np.float64)
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if bad:
        return CaseResult(case, probe, what, False, f"{bad} of {values.size} values are nan or inf (scores up to {_top_score(ctx, case):.0f})", actual=array, expected=expected)
    if what == "weights":
        sums = values.sum(axis=-1)
        worst = float(np.max(np.abs(sums - 1.0)))
        if worst > ROW_SUM:
            return CaseResult(case, probe, what, False, f"rows sum to {float(sums.min()):.6g}..{float(sums.max()):.6g} instead of 1", actual=array, expected=expected)
    mismatch = compare(values, expected, LARGE_TOLERANCE)
    summary = f"finite{', rows sum to 1' if what == 'weights' else ''}; {mismatch.describe()}"
    return CaseResult(case, probe, what, mismatch.ok, summary, mismatch, actual=array, expected=expected)


def _top_score(ctx: CheckContext, case: str) -> float:
    data = ctx.refs.cases[case]
    return float(np.max(np.abs(data.Q @ np.swapaxes(data.K, -1, -2)))) / float(np.sqrt(data.Q.shape[-1]))
