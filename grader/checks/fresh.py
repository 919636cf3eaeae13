"""fresh: random cases drawn at grading time, from a seed that is never stored, match the reference.

Their shapes and values exist nowhere on disk, so replaying stored answers cannot pass them. The
expected values come from the float64 reference in the grader's own process.
"""

from __future__ import annotations

import numpy as np

from grader.attention import attention, attention_weights
from grader.checks.base import CaseResult, CheckContext, CheckResult, compare_probe, result, summarise
from grader.checks.memo import OwnerMemo
from grader.suite import CheckSpec

# The reference's answers on a run's fresh probes are the same for every submission of the run.
_EXPECTED: OwnerMemo[np.ndarray] = OwnerMemo()


class FreshCheck:
    kind = "fresh"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        probes = [p for p in ctx.probes.values() if p.fresh]
        if not probes:
            return result(spec, "error", "no fresh probes were built for this run")
        cases: list[CaseResult] = []
        for p in probes:
            if p.kind == "identity":
                cases.append(compare_probe(ctx, p.case, p.name, "weights", _EXPECTED.get(p, ("weights",), lambda: attention_weights(p.Q, p.K))))
            else:
                cases.append(compare_probe(ctx, p.case, p.name, "output", _EXPECTED.get(p, ("output",), lambda: attention(p.Q, p.K, p.V))))
        checked = summarise(spec, cases)
        shapes = "; ".join(f"{p.case}: Q{tuple(p.Q.shape)}, V{tuple(p.V.shape)}" for p in probes if p.kind == "values")
        if checked.passed:
            return result(spec, "passed", f"{len(cases)} comparisons on fresh inputs match ({shapes})", tuple(cases))
        return checked
