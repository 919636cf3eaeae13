"""The mistakes in the weights a submission returns beside its output.

A function that returns ``(output, weights)`` is judged on both (grader.returns). Its output goes
through the catalogue's search like any other; its weights are searched here, as the output of a
function that returns its weights (the catalogue's returns-weights option): the variant that
reproduces them names their mistakes, ``return w @ V, scores`` being softmax-missing in the
weights and ``return w @ V, log_softmax(s)`` softmax-log. A mistake the output shows as well is
named once, from the output (the engine keeps the first evidence). Weights that nothing
reproduces are a values mismatch of the returned weights, said to be so: the fix then points at
the weights, not at a formula the output already follows.
"""

from __future__ import annotations

from dataclasses import replace

from grader.compare import compare
from grader.diagnosis import describe
from grader.diagnosis.catalogue import OUTPUT, POSITION, REFERENCE, Variant
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.replay import Evidence
from grader.observation import Observation
from grader.probes import Probe, tolerance_for
from grader.suite import Tolerance

WEIGHTS = OUTPUT.options[1]  # the option whose result is the weight matrix
AT = POSITION["output"]
# The reference that returns its weights: what correct returned weights are.
RIGHT = Variant(REFERENCE.choice[:AT] + (WEIGHTS,) + REFERENCE.choice[AT + 1 :])
PREFIX = "in the weights returned beside the output: "
# The evidence key that marks a diagnosis of the returned weights, not of the output (its fix is
# its own, so grader.diagnosis.fixes keeps it in every framework).
MARK = "returned_weights"


def weights_diagnoses(probes: dict[str, Probe], observed: dict[str, Observation], tolerance: Tolerance, failed: tuple[str, ...]) -> list[Diagnosis]:
    """The mistakes in the returned weights of the observed probes that returned a pair (none
    when they are right, or when no probe returned weights)."""
    pairs = {n: o for n, o in observed.items() if o.status == "returned" and o.value is not None and o.value.weights is not None}
    if not pairs:
        return []
    # The weights in the output's place, so that the catalogue replays and describes them.
    as_output = {n: replace(o, value=replace(o.value, array=o.value.weights, weights=None)) for n, o in pairs.items() if o.value is not None}
    names = list(as_output)
    ev = Evidence({n: probes[n] for n in names}, as_output, {n: tolerance_for(probes[n], tolerance) for n in names})
    if all(ev.matches(RIGHT, n) for n in names):
        return []
    output_right = _output_right(probes, observed, tolerance)
    variant = ev.search((v for v in ev.variants() if v.option("output") is WEIGHTS), names)
    if variant is None:
        return [_unexplained(ev, names, failed, output_right)]
    found = [d for d in describe.describe(ev, variant, names, failed) if d.name != "returns-weights"]
    return [_about_weights(d, output_right) for d in found]


def pair_of_weights(d: Diagnosis, observed: dict[str, Observation]) -> Diagnosis:
    """returns-weights said of a pair of two weight matrices (``return w, w``, grader.returns),
    whose first item the search judged as the output: the message says so, and the fix keeps
    the pair the submission meant to return."""
    if d.name != "returns-weights" or not any(o.value is not None and o.value.weights is not None for o in observed.values()):
        return d
    first = d.message.replace("returns shape", "the first has shape", 1).replace("the output equals", "the first equals", 1)
    return replace(d, message=f"of the two arrays it returns neither is the output: {first}", fix="return weights @ V, weights   # the output first, then the weights", evidence={**d.evidence, "pair": True})


def _output_right(probes: dict[str, Probe], observed: dict[str, Observation], tolerance: Tolerance) -> bool:
    """Every observed output is the reference's: then the fix can say the output is right."""
    ev = Evidence({n: probes[n] for n in observed}, observed, {n: tolerance_for(probes[n], tolerance) for n in observed})
    return all(ev.matches(REFERENCE, n) for n in observed)


def fix(output_right: bool) -> str:
    lead = "The output is right; the weights returned beside it are not. " if output_right else "The weights returned beside the output are wrong too. "
    return lead + "Return the weights the output is computed from, the softmax over the keys: `return weights @ V, weights`."


def _about_weights(d: Diagnosis, output_right: bool) -> Diagnosis:
    return replace(d, message=PREFIX + d.message, fix=fix(output_right), evidence={**d.evidence, MARK: True})


def _unexplained(ev: Evidence, names: list[str], failed: tuple[str, ...], output_right: bool) -> Diagnosis:
    """No known mistake reproduces the returned weights: their first difference from the
    reference weights, with its numbers."""
    evidence: dict[str, object] = {MARK: True}
    message = "the weights returned beside the output differ from the reference weights"
    for n in sorted(names, key=lambda n: (ev.probes[n].magnitude > 1.0, ev.probes[n].fresh)):
        p = ev.probes[n]
        actual, expected = ev.returned(n), RIGHT(p.Q, p.K, p.V)
        if actual is None:
            continue
        if actual.shape != expected.shape or actual.dtype.kind not in "fiu":
            evidence.update(probe=n, shape=list(actual.shape), expected_shape=list(expected.shape))
            message = f"the weights returned beside the output have shape {tuple(actual.shape)} and dtype {actual.dtype} for {describe.shape_text(ev, n)}, expected {tuple(expected.shape)}"
            break
        result = compare(actual, expected, ev.tolerances[n])
        if not result.ok:
            evidence.update(probe=n, input_shape=describe.shape_text(ev, n), **result.as_dict())
            message = f"the weights returned beside the output, {n} ({describe.shape_text(ev, n)}): {result.describe()}"
            break
    d = Diagnosis.of("values-mismatch", message, evidence, failed)
    return replace(d, fix=fix(output_right))
