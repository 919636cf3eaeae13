"""shape: one sequence with T_q, T_k, d_k and d_v all different gives a finite float (T_q, d_v)."""

from __future__ import annotations

import numpy as np

from grader.checks.base import CaseResult, CheckContext, CheckResult, result, returned_array
from grader.probes import probe_name
from grader.suite import CheckSpec


class ShapeCheck:
    kind = "shape"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        cases = []
        for case in spec.cases:
            shape = ctx.suite.cases[case].shape
            probe = probe_name(case, "values")
            array, problem = returned_array(ctx.run.get(probe), ctx, shape.output())
            if array is not None and not np.all(np.isfinite(array)):
                problem = f"{int(np.count_nonzero(~np.isfinite(array)))} of {array.size} values are not finite"
            summary = problem or f"shape {shape.output()} and finite for inputs with {shape.describe()}"
            cases.append(CaseResult(case, probe, "shape", not problem, summary))
        failed = [c for c in cases if not c.passed]
        if failed:
            return result(spec, "failed", failed[0].summary, tuple(cases))
        return result(spec, "passed", cases[0].summary, tuple(cases))
