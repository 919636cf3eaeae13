"""weights, outputs, batch and cross: values against the stored references.

* weights: with V = identity the output is the weight matrix; compared with the stored weights;
* outputs: the output for the stored random V, compared with the stored output;
* batch: both of the above on a batched case, so each batch element is checked;
* cross: both on a cross-attention case (T_q != T_k, d_k != d_v), where a size taken from the
  wrong array shows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from grader.checks.base import CaseResult, CheckContext, CheckResult, compare_probe, summarise
from grader.probes import probe_name
from grader.returns import returned_weights_results
from grader.suite import CheckSpec


class WeightsCheck:
    kind = "weights"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        cases = [compare_probe(ctx, c, probe_name(c, "identity"), "weights", ctx.refs.cases[c].weights) for c in spec.cases]
        # Weights the function returns beside its output are checked directly too
        return summarise(spec, cases + returned_weights_results(ctx, spec.cases))


class OutputsCheck:
    kind = "outputs"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        return summarise(spec, [compare_probe(ctx, c, probe_name(c, "values"), "output", ctx.refs.cases[c].output) for c in spec.cases])


Judge = Callable[[CheckContext, str, str, str, np.ndarray], CaseResult]


def outputs_and_weights(spec: CheckSpec, ctx: CheckContext, judge: Judge = compare_probe) -> CheckResult:
    """Each case's output (stored V) and weights (V = identity), judged by ``judge``."""
    cases: list[CaseResult] = []
    for c in spec.cases:
        data = ctx.refs.cases[c]
        cases.append(judge(ctx, c, probe_name(c, "values"), "output", data.output))
        cases.append(judge(ctx, c, probe_name(c, "identity"), "weights", data.weights))
    # Weights the function returns beside its output are checked directly too.
    return summarise(spec, cases + returned_weights_results(ctx, spec.cases))


class BatchCheck:
    kind = "batch"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        return outputs_and_weights(spec, ctx)


class CrossCheck:
    kind = "cross"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        return outputs_and_weights(spec, ctx)
