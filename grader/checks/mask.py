"""mask: with a causal or padding mask, weights and outputs match the masked reference.

For each masked case: the weights (V = identity, under the mask) against the stored masked
weights, the output for the stored V against the stored masked output, and the weights under a
mask that keeps every key against the plain reference (keeping everything must change nothing).
"""

from __future__ import annotations

from grader.attention import attention_weights
from grader.checks.base import CaseResult, CheckContext, CheckResult, compare_probe, summarise
from grader.masks import KEEP_ALL
from grader.probes import probe_name
from grader.returns import returned_weights_results
from grader.suite import CheckSpec


class MaskCheck:
    kind = "mask"

    def run(self, spec: CheckSpec, ctx: CheckContext) -> CheckResult:
        cases: list[CaseResult] = []
        for c in spec.cases:
            data = ctx.refs.cases[c]
            cases.append(compare_probe(ctx, c, probe_name(c, "identity"), "masked weights", data.weights))
            cases.append(compare_probe(ctx, c, probe_name(c, "values"), "masked output", data.output))
            cases.append(compare_probe(ctx, c, probe_name(c, KEEP_ALL), "weights with an all-True mask", attention_weights(data.Q, data.K)))
        return summarise(spec, cases + returned_weights_results(ctx, spec.cases))
