"""The checks, and the pipeline that runs them in the suite's order.

A check whose prerequisites did not pass is skipped, so one root cause (a file that does not load,
a wrong output shape) is reported once instead of as a cascade of value mismatches.
"""

from __future__ import annotations

from grader.checks.base import Check, CheckContext, CheckResult, result
from grader.checks.behaviour import DeterminismCheck, MutationCheck
from grader.checks.fresh import FreshCheck
from grader.checks.gradients import GradientsCheck
from grader.checks.load import LoadCheck
from grader.checks.mask import MaskCheck
from grader.checks.shape import ShapeCheck
from grader.checks.stability import StabilityCheck
from grader.checks.values import BatchCheck, CrossCheck, OutputsCheck, WeightsCheck
from grader.observation import WorkerRun
from grader.probes import Probe
from grader.refdata import ReferenceSet
from grader.suite import Suite

REGISTRY: dict[str, Check] = {
    check.kind: check
    for check in (
        LoadCheck(), ShapeCheck(), WeightsCheck(), OutputsCheck(), BatchCheck(), CrossCheck(),
        StabilityCheck(), MutationCheck(), DeterminismCheck(), FreshCheck(), MaskCheck(), GradientsCheck(),
    )
}


def run_checks(suite: Suite, refs: ReferenceSet, run: WorkerRun, probes: list[Probe] | None = None) -> list[CheckResult]:
    """Raises nothing: a check that cannot judge (no observation) fails with the reason."""
    by_name = {p.name: p for p in probes or ()}
    results: dict[str, CheckResult] = {}
    load_failed = False
    for spec in suite.checks:
        blockers = [r for r in spec.requires if not results[r].passed]
        if load_failed and spec.kind != "load":
            results[spec.id] = result(spec, "skipped", "skipped: the submission did not load")
        elif blockers:
            results[spec.id] = result(spec, "skipped", f"skipped: needs '{blockers[0]}' to pass first")
        else:
            results[spec.id] = REGISTRY[spec.kind].run(spec, CheckContext(suite, refs, run, dict(results), by_name))
        if spec.kind == "load" and not results[spec.id].passed:
            load_failed = True
    return list(results.values())
