"""mutation and determinism: how the function behaves, beyond the values it returns.

* mutation: the worker sends back Q, K and V as they were after the call; they must be unchanged;
* determinism: the probe is called twice, each time on fresh copies of the same inputs; the two
  results must agree within the tolerance. (Fresh copies: a function that changes its inputs in
  place would otherwise look random, and that is the mutation check's finding.)
"""

from __future__ import annotations

import numpy as np

from grader.checks.base import CaseResult, CheckContext, CheckResult, no_result, summarise
from grader.probes import probe_name
from grader.suite import CheckSpec


class MutationCheck:
    kind = "mutation"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        cases = []
        for case in spec.cases:
            probe = probe_name(case, "values")
            obs = ctx.run.get(probe)
            if obs is None or not obs.inputs_after:
                cases.append(CaseResult(case, probe, "inputs", False, no_result(ctx) if obs is None else "the inputs were not returned after the call"))
                continue
            data = ctx.refs.cases[case]
            changed = []
            for label, sent in (("Q", data.Q), ("K", data.K), ("V", data.V)):
                after = obs.inputs_after.get(label)
                if after is None or after.shape != sent.shape or not np.array_equal(after.astype(np.float64), sent, equal_nan=True):
                    changed.append(label)
            summary = f"{', '.join(changed)} changed by the call" if changed else "Q, K and V unchanged after the call"
            cases.append(CaseResult(case, probe, "inputs", not changed, summary))
        return summarise(spec, cases)


class DeterminismCheck:
    kind = "determinism"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        cases = []
        tolerance = ctx.suite.tolerance
        for case in spec.cases:
            probe = probe_name(case, "values")
            first, second = ctx.run.get(probe, 0), ctx.run.get(probe, 1)
            if first is None or second is None:
                cases.append(CaseResult(case, probe, "repeat", False, no_result(ctx)))
                continue
            a = first.value.array if first.value is not None else None
            b = second.value.array if second.value is not None else None
            if first.status != second.status:
                summary, same = f"call 1 {first.status}, call 2 {second.status}", False
            elif a is None or b is None or a.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
                summary, same = f"both calls {first.status} without an array to compare", first.status == "raised"
            elif a.shape != b.shape:
                summary, same = f"two calls return shapes {tuple(a.shape)} and {tuple(b.shape)}", False
            else:
                with np.errstate(all="ignore"):
                    x, y = a.astype(np.float64), b.astype(np.float64)
                    agree = np.isclose(x, y, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
                differ = int(np.count_nonzero(~agree))
                same = differ == 0
                summary = "two calls agree" if same else f"two calls differ in {differ} of {x.size} elements"
            cases.append(CaseResult(case, probe, "repeat", same, summary))
        return summarise(spec, cases)
