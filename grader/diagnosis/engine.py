"""From observations to named mistakes.

The order of questions, each answered from evidence:

1. Did the worker load the file and find the function? (load-error, function-missing)
2. Did it stop early? (timeout, memory-limit, crash of the interpreter)
3. Which smallest set of known mistakes reproduces every observed probe? The catalogue's variants
   (with scale factors fitted from the submission's own weights) are replayed on the same inputs
   in this process and compared with what the submission did, raised exceptions included.
   The probes are taken group by group (single sequences, batches, large inputs, fresh inputs),
   each group explained by a variant that must also reproduce every group explained before it,
   so a mistake named from one probe is never contradicted by another. The weights a function
   returns beside its output are searched too, for mistakes of their own (``returned_weights``).
4. A group that no variant explains is a crash, a bad return or a values mismatch, with its numbers; fresh
   inputs that fail while every stored case passes are a hard-coded submission. Code written for
   some input ranks only (every probe of those ranks raises, none of the others) is a crash on
   those ranks, and the probes of the ranks where it runs are searched again on their own, so
   a mistake in its math there is named beside the crash.
5. What the catalogue cannot replay is seen directly: inputs changed in place, two calls that
   disagree, single-precision results (a warning), and differences beyond the tolerance that
   only half-precision rounding explains (reduced-precision, then the failing mistake).

Nothing here reads the submission's source: a location is attached afterwards (see ``locate``),
and only to a diagnosis the evidence already produced.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Iterable

import numpy as np

from grader.checks.base import CheckResult
from grader.diagnosis import behaviour, describe
from grader.diagnosis.catalogue import POSITION, REFERENCE, SHIFT, Variant
from grader.diagnosis.gradients import gradient_diagnoses, gradient_verdicts, with_gradient_norms
from grader.diagnosis.mask_pattern import unasked_mask
from grader.diagnosis.masks import mask_diagnoses
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.replay import OVERFLOW_ERRORS, Evidence
from grader.diagnosis.returned_weights import pair_of_weights, weights_diagnoses
from grader.diagnosis.squeeze import restore_dropped_axes
from grader.entry import NAME_LIMIT, attention_candidate
from grader.frameworks import is_framework_memory_error
from grader.observation import ErrorInfo, Observation, WorkerRun
from grader.probes import Probe, tolerance_for
from grader.suite import Suite, Tolerance

MEMORY_ERRORS = ("MemoryError", "numpy._core._exceptions._ArrayMemoryError", "numpy.core._exceptions._ArrayMemoryError")
GROUPS = ("single", "batched", "large", "fresh")


def clip(text: str, limit: int = 160) -> str:

    return describe.clip(text, limit)


def _failed(checks: list[CheckResult]) -> tuple[str, ...]:
    return tuple(c.id for c in checks if c.outcome == "failed")


def diagnose(suite: Suite, probes: list[Probe], run: WorkerRun, checks: list[CheckResult]) -> list[Diagnosis]:
    failed = _failed(checks)
    load = run.load
    early = _stopped_early(run, failed)
    if load is None:
        if early:
            return early
        return [Diagnosis.of("load-error", "the worker ended while importing the file", {"detail": run.detail}, failed)]
    if not load.ok:
        return [_load_failure(suite, run)]
    if not load.accepts_three:
        return [_function_missing(suite.function, f"{suite.function}{load.signature} cannot be called with three arrays: {load.signature_error}", {"signature": load.signature}, failed)]

    # Gradient probes are judged apart (grader/diagnosis/gradients.py): the catalogue replays
    # forward values, and a call that fails only under autograd is no forward mistake.
    gradients = gradient_verdicts(suite, probes, run)
    probes = [p for p in probes if not p.gradients]
    by_name = {p.name: p for p in probes}
    # Masked probes are judged apart (below): the catalogue has no masks.
    observed = {name: obs for (name, call), obs in run.observations.items() if call == 0 and name in by_name and by_name[name].mask is None}
    diagnoses = list(early)
    memory_probes = [
        n for n, o in observed.items()
        if o.status == "raised" and o.error is not None
        and is_memory_error(o.error)
    ]
    if memory_probes and not any(d.name == "memory-limit" for d in diagnoses):
        first = by_name[memory_probes[0]]
        message = f"MemoryError on {first.name} (Q{tuple(first.Q.shape)}, K{tuple(first.K.shape)}, V{tuple(first.V.shape)})"
        if run.status == "timeout" and len(memory_probes) == len(observed):
            # Every call ran into the memory limit, and reaching it took the time: one root cause.
            diagnoses = [d for d in diagnoses if d.name != "timeout"]
            message += f" and on every one of the {len(memory_probes)} calls before the time ran out ({run.duration_s:.1f} s)"
        diagnoses.append(Diagnosis.of("memory-limit", message, {"probe": first.name, "memory_errors": len(memory_probes)}, failed))
    for name in memory_probes:
        del observed[name]
    # A squeezed result is judged in the output's shape from here on: the squeeze is one mistake,
    # named apart, and what the math beside it did is still replayed.
    observed, squeezed = restore_dropped_axes(suite, by_name, observed, failed)

    random = behaviour.nondeterministic(by_name, run.observations, suite.tolerance, failed)
    if random is None and not failed and run.status == "completed" and len(observed) == len(by_name):
        # Every check passed on every probe: the reference itself explains them all, and the
        # catalogue has nothing to add (the most common case in a batch, and the cheapest).
        found = []
    elif random is None:
        found = name_mistakes(by_name, observed, suite.tolerance, failed)
        # The weights returned beside the output are judged too: their own mistakes, after the
        # output's (one the output shows as well is named once, from the output).
        found = [pair_of_weights(d, observed) for d in found] + weights_diagnoses(by_name, observed, suite.tolerance, failed)
    else:
        # Random results match no variant and no reference: only what does not depend on the
        # values (an exception, a wrong type or shape) is worth reporting beside it.

        ev = Evidence(dict(by_name), observed, {n: tolerance_for(p, suite.tolerance) for n, p in by_name.items()})
        found = [d for judge in (describe.crash, describe.bad_return) if (d := judge(ev, list(observed), failed)) is not None] + [random]
    if squeezed is not None:
        found.append(squeezed)
    mutated = behaviour.input_mutated(by_name, run.observations, failed)
    if mutated is not None:
        found.append(mutated)
    for d in found:
        if not any(known.name == d.name for known in diagnoses):  # one entry per mistake, first evidence wins
            diagnoses.append(d)
    # Masked probes are judged apart (grader/diagnosis/masks.py): the catalogue has no masks.
    for d in mask_diagnoses(suite, probes, run, failed, {known.name for known in diagnoses}):
        if not any(known.name == d.name for known in diagnoses):
            diagnoses.append(d)
    for d in gradient_diagnoses(gradients, run, failed, is_memory_error):
        if not any(known.name == d.name for known in diagnoses):
            diagnoses.append(d)
    diagnoses = with_gradient_norms(diagnoses, gradients)
    if failed and all(d.name == "values-mismatch" for d in diagnoses if d.severity == "error"):
        # Differences no known mistake explains may be rounding to half precision: then that is
        # the mistake, and it explains the failed checks (a warning alone would leave them unexplained).
        rounding = behaviour.rounding_beyond_tolerance(by_name, observed, {n: tolerance_for(p, suite.tolerance) for n, p in by_name.items()}, failed)
        # Or weights of exactly 0 in the shape of a causal mask off by some keys, which the
        # catalogue does not replay (it has the causal mask itself).
        instead = rounding or unasked_mask(by_name, observed, failed)
        if instead is not None:
            diagnoses = [d for d in diagnoses if d.name != "values-mismatch"] + [instead]
    if failed and not any(d.severity == "error" for d in diagnoses):
        diagnoses.append(_unexplained_checks(checks, failed))
    precision = behaviour.reduced_precision(by_name, observed, suite.tolerance)
    named = any(d.name == "reduced-precision" for d in diagnoses)
    if precision is not None and not named and (precision.evidence["dtype"] != ["float64"] or not any(d.severity == "error" for d in diagnoses)):
        diagnoses.append(precision)
    return _apply_severity(suite, diagnoses)


def is_memory_error(error: ErrorInfo) -> bool:
    return error.type in MEMORY_ERRORS or is_framework_memory_error(error.type, error.message)  # torch and JAX say it their way


def name_mistakes(probes: dict[str, Probe], observed: dict[str, Observation], tolerance: Tolerance, failed: tuple[str, ...] = ()) -> list[Diagnosis]:
    """The catalogue mistakes (and unexplained failures) shown by the observed probes.

    A pure function of inputs and observations: the tests call it on hand-made observations.
    """
    if not observed:
        return []

    tolerances = {n: tolerance_for(p, tolerance) for n, p in probes.items()}
    ev = Evidence({n: probes[n] for n in observed}, observed, tolerances)
    variants = ev.variants()
    names = list(observed)
    found = _by_group(ev, variants, names, failed)
    running = _running_ranks(ev, names) if any(d.name == "crash" for d in found) else None
    if running is None:
        return found
    # Code written for some ranks only (bmm, transpose(0, 2, 1), swapaxes(K, 2, 3)): the ranks
    # that raise are the crash, and the ranks where it runs are explained by the catalogue like
    # any other submission's, so a mistake in its math there is named too.
    crash = describe.crash(ev, names, failed)
    assert crash is not None
    there = [d for d in _by_group(ev, variants, running, failed) if d.name != "crash"]
    return [crash] + [describe.on_ranks(ev, d, running, names) for d in there]


def _running_ranks(ev: Evidence, names: list[str]) -> list[str] | None:
    """The probes of the ranks where the code runs, when the input ranks split cleanly: every
    probe of some ranks raises, no probe of the others does (but an overflow on large scores,
    which the replay judges). None when they do not split so (a rank that both raises and
    runs, or no rank that runs)."""
    by_rank: dict[int, list[str]] = {}
    for n in names:
        by_rank.setdefault(ev.probes[n].Q.ndim, []).append(n)

    def raised(n: str) -> bool:
        obs = ev.observed[n]
        overflow = ev.probes[n].magnitude > 1.0 and obs.error is not None and obs.error.type in OVERFLOW_ERRORS
        return obs.status == "raised" and not overflow

    raising = {rank for rank, members in by_rank.items() if all(ev.observed[n].status == "raised" for n in members)}
    running = [n for rank, members in by_rank.items() if rank not in raising for n in members]
    if not raising or not running or any(raised(n) for n in running):
        return None
    return [n for n in names if n in running]  # in the probes' order


def group_of(probe: Probe) -> str:
    if probe.fresh:
        return "fresh"
    if probe.magnitude > 1.0:
        return "large"
    return "batched" if probe.batched else "single"


def _by_group(ev: Evidence, variants: Iterable[Variant], names: list[str], failed: tuple[str, ...]) -> list[Diagnosis]:
    """Group by group; when every group is explained, the last search covered every probe, so the
    result is the variant with the fewest mistakes that reproduces them all."""

    groups = {g: [n for n in names if group_of(ev.probes[n]) == g] for g in GROUPS}
    explained: list[str] = []
    base: Variant | None = None
    diagnoses: list[Diagnosis] = []
    unexplained: list[str] = []
    for group in GROUPS:
        members = groups[group]
        if not members:
            continue
        if not unexplained:
            # A variant for this group must also reproduce every group explained before it.
            variant = ev.search(variants, members, known=explained)
        else:
            # Past a group that nothing explains, a mistake of the catalogue would have to appear
            # beside an unknown one; only the variant found so far is held against the rest.
            # Large scores are the exception: an unshifted softmax overflows whatever else the
            # code does (or fails to do on batches), so the same variant without the shift is
            # tried too, held against every group explained before.
            candidate = base or REFERENCE
            tries = [candidate] + (_unshifted(candidate) if group == "large" else [])
            variant = next((v for v in tries if all(ev.matches(v, n) for n in members + explained)), None)
        if variant is not None:
            base = variant
            explained += members
            continue
        if group == "fresh" and base is not None and base.is_reference and not unexplained:
            diagnoses.append(describe.hardcoded(ev, explained, members, failed))
        elif group == "large" and _only_overflow(ev, members, zeros=not unexplained):
            # Nothing reproduces the exact values, but the only symptom is NaN/inf where the scores are large.
            diagnoses.append(describe.unstable(ev, SHIFT.options[1], members, failed, replayed=False))
        else:
            diagnoses += describe.unexplained(ev, members, failed)
        unexplained += members
    # Beside a group nothing explains, a variant is named only if some probe it explains returned
    # other values than the reference: raising on the same probes alone (an axis out of bounds on
    # a single sequence, say) is not evidence of how the code computes.
    shown = not unexplained or any(ev.returned(n) is not None and not ev.matches(REFERENCE, n) for n in explained)
    if base is not None and not base.is_reference and shown:
        diagnoses = describe.describe(ev, base, explained, failed) + diagnoses
    return diagnoses


def _unshifted(variant: Variant) -> list[Variant]:
    """``variant`` with each softmax-unstable shift option instead of its own."""
    at = POSITION["shift"]
    if variant.choice[at] is not SHIFT.default:
        return []
    return [Variant(variant.choice[:at] + (o,) + variant.choice[at + 1 :]) for o in SHIFT.options[1:] if o.diagnosis == "softmax-unstable"]


def _only_overflow(ev: Evidence, members: list[str], zeros: bool = True) -> bool:
    """Every large probe that fails returns non-finite values (or raises an overflow) where the
    reference stays finite, or (with ``zeros``: when every group before was explained, so that
    zeros are no stand-in answer) rows of zeros exactly where exp of the scores overflows."""
    bad = [n for n in members if not ev.matches(REFERENCE, n)]
    if not bad:
        return False
    for n in bad:
        obs, actual = ev.observed[n], ev.returned(n)
        if obs.status == "raised" and obs.error is not None and obs.error.type in ("OverflowError", "FloatingPointError", "ZeroDivisionError"):
            continue
        if actual is None:
            return False
        if bool(np.isfinite(actual.astype(np.float64)).all()) and (not zeros or describe.collapsed_rows(ev.probes[n], actual) is None):
            return False
    return True


def _apply_severity(suite: Suite, diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    out = []
    for d in diagnoses:
        level = suite.severity.get(d.name)
        if level == "off":
            continue
        out.append(d if level is None else Diagnosis(d.code, d.name, level, d.message, d.fix, d.evidence, d.checks, d.location))  # type: ignore[arg-type]
    return out


def _stopped_early(run: WorkerRun, failed: tuple[str, ...]) -> list[Diagnosis]:
    where = f" while running {run.last_probe}" if run.last_probe else (" while importing the file" if run.load is None else "")
    evidence: dict[str, Any] = {"detail": run.detail, "probe": run.last_probe, "duration_s": round(run.duration_s, 3), "max_rss_mb": run.max_rss_kb // 1024}
    if run.status == "timeout":
        return [Diagnosis.of("timeout", f"stopped after {run.duration_s:.1f} s{where}: {run.detail}", evidence, failed)]
    if run.status == "memory":
        return [Diagnosis.of("memory-limit", f"the worker died{where} with {run.max_rss_kb // 1024} MB resident", evidence, failed)]
    if run.status in ("crashed", "protocol-error"):
        return [Diagnosis.of("crash", f"the interpreter stopped{where}: {run.detail}", evidence, failed)]
    return []


def _load_failure(suite: Suite, run: WorkerRun) -> Diagnosis:
    load = run.load
    assert load is not None
    if load.reason == "function-missing":
        found = f"; it defines {', '.join(load.available)}" if load.available else ""
        d = _function_missing(suite.function, f"no callable named '{suite.function}'{found}", {"available": list(load.available)}, ("load",))
        other = attention_candidate(load.available)
        if other is None:
            return d
        return replace(d, fix=f"Define `def {suite.function}(Q, K, V):` at the top level of the file, or, if `{other}` is the function, grade it with `--function {other}` (in a suite, `function: {other}`).", evidence={**d.evidence, "candidate": other})
    error = load.error
    assert error is not None
    where = f" at {error.where}" if error.line else ""
    d = Diagnosis.of("load-error", f"importing the file raised {describe.quote(error)}{where}", {"exception": error.type, "message": error.message, "line": error.line, "file": error.file, "code": error.code, **({"cell": error.cell} if error.cell else {})}, ("load",))
    missing = missing_module(error.type, error.message)
    if missing is None:
        if error.cell:
            # A notebook runs as one script, every code cell in order: "import submission" means
            # nothing to its author; the cell does.
            return replace(d, fix=(
                f"Make the notebook run from top to bottom as a script: cell {error.cell} raises {error.type} at line {error.line}. "
                "Fix that cell, or remove it if the function does not need it (a scratch or plotting cell)."
            ))
        return d
    # Not installed for the grader either (else the run reports its own environment instead),
    # and no file of the submission: a helper module left out, or a plotting import.
    return replace(d, fix=(
        f"The file imports `{missing}`, which is neither installed where it is graded nor a file of the submission: submit it if it is yours, "
        f"keep plots and experiments out of the graded file (under `if __name__ == \"__main__\":`), or install `{missing}` beside the grader if the task allows it."
    ), evidence={**d.evidence, "module": missing})


# "No module named 'matplotlib'" (or 'matplotlib.pyplot'), as ModuleNotFoundError says it.
_NO_MODULE = re.compile(r"No module named '([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z0-9_.]*)?'")


def missing_module(error_type: str, message: str) -> str | None:
    """The top-level module an import could not find, from the exception's text (the
    submission's: only a plain identifier shorter than NAME_LIMIT is taken)."""
    if error_type not in ("ModuleNotFoundError", "ImportError"):
        return None
    found = _NO_MODULE.fullmatch(message.strip())
    if found is None or len(found.group(1)) >= NAME_LIMIT:
        return None
    return found.group(1)


def _function_missing(function: str, message: str, evidence: dict[str, Any], checks: tuple[str, ...]) -> Diagnosis:
    """function-missing, its fix naming the graded function: the registry's names the default
    one, and --function or the suite may grade another."""
    d = Diagnosis.of("function-missing", message, evidence, checks)
    return replace(d, fix=f"Define `def {function}(Q, K, V):` at the top level of the file (or grade another name with --function).")


def _unexplained_checks(checks: list[CheckResult], failed: tuple[str, ...]) -> Diagnosis:
    for check in checks:
        for case in check.cases:
            if not case.passed and case.mismatch is not None:
                return Diagnosis.of("values-mismatch", f"{check.id}, {case.case}: {case.summary}", {"check": check.id, "case": case.case, **case.mismatch.as_dict()}, failed)
    first = next(c for c in checks if c.id in failed)
    return Diagnosis.of("values-mismatch", f"{first.id}: {first.summary}", {"check": first.id}, failed)
