"""The gradient mistakes, named from the gradient probes (PyTorch and JAX submissions only).

* not-differentiable: an input gets no gradient from the output. Its gradient is ``None`` (a
  ``.detach()`` on the way), all zeros where the reference's is not (``jax.lax.stop_gradient``),
  or none can be computed at all: the output has no graph (``torch.no_grad()``, a NumPy round
  trip, a tensor rebuilt from ``.item()``), the call raises only when its inputs require
  gradients (``q.numpy()``, a JAX tracer turned into a NumPy array), or the backward raises (an
  in-place ``s.exp_()`` or ``s /= ...`` on a tensor autograd saved is told apart: its own fix);
* gradient-mismatch: the same call's output matches the reference, but a gradient does not (a
  custom autograd function with a wrong backward, a gradient stopped on one branch).

Beside ``scale-missing`` and ``scale-by-dk`` (named by the catalogue from the forward values) the
gradients' norms relative to the reference's are added as figures: a wrong scale changes how
much gradient the softmax passes back, and that is measured here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from grader.backward import INPUTS
from grader.checks.gradients import GradientVerdict, judge_gradients
from grader.diagnosis import inplace
from grader.diagnosis.describe import quote
from grader.diagnosis.model import Diagnosis
from grader.observation import ErrorInfo, WorkerRun
from grader.probes import GRADIENTS, Probe, probe_name
from grader.suite import Suite

# The forward mistakes whose message gets the gradients' norms.
SCALE_NAMES = ("scale-missing", "scale-by-dk")


def gradient_verdicts(suite: Suite, probes: list[Probe], run: WorkerRun) -> list[GradientVerdict]:
    """A verdict per gradient probe the worker answered; none when the suite (as this
    submission's framework sees it) has no gradients check."""
    if not any(c.kind == GRADIENTS for c in suite.checks):
        return []
    return [judge_gradients(p, obs, suite.tolerance) for p in probes if p.gradients and (obs := run.get(p.name)) is not None]


def listed(names: list[str]) -> str:
    """Q / Q and K / Q, K and V."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _plain_call_returns(run: WorkerRun, probe: Probe) -> bool:
    """Whether a call without gradients returns: on the same case's stored values, else anywhere."""
    plain = run.get(probe_name(probe.case, "values"))
    if plain is not None:
        return plain.status == "returned"
    return any(o.status == "returned" for (name, _), o in run.observations.items() if not name.endswith("/" + GRADIENTS))


def not_differentiable(verdicts: list[GradientVerdict], run: WorkerRun, failed: tuple[str, ...]) -> Diagnosis | None:
    showing = [v for v in verdicts if v.without() and (v.status != "raised" or _plain_call_returns(run, v.probe))]
    if not showing:
        return None
    first = showing[0]
    inputs = [x for x in INPUTS if any(x in v.without() for v in showing)]
    evidence: dict[str, Any] = {"inputs": inputs, "probe": first.probe.name, "probes": [v.probe.name for v in showing]}
    if first.status == "raised" and first.error is not None:
        where = f" at {first.error.where}" if first.error.line else ""
        detail = f"differentiated, the call raises {quote(first.error)}{where}, where a plain call returns"
        evidence.update(how="raised", exception=first.error.type, exception_message=first.error.message, line=first.error.line, cell=first.error.cell)
    elif first.status == "failed" and first.error is not None:
        where = f" at {first.error.where}" if first.error.line else ""
        detail = f"the backward raises {quote(first.error)}{where}"
        evidence.update(how="backward-raised", exception=first.error.type, exception_message=first.error.message, line=first.error.line, cell=first.error.cell)
    elif first.status == "no-gradient":
        detail = first.summary.split(": ", 1)[-1]
        evidence.update(how="no-graph")
    else:
        nones = [g for g in first.inputs if g.verdict == "none"]
        hows = sorted({g.how for g in nones})
        parts = []
        if "None" in hows:
            parts.append(f"autograd gives None for {listed(['d' + g.input for g in nones if g.how == 'None'])}")
        zeros = ["d" + g.input for g in nones if g.how == "zeros"]
        if zeros:
            parts.append(f"{listed(zeros)} is all zeros where the reference's is not" if len(zeros) == 1 else f"{listed(zeros)} are all zeros where the reference's are not")
        detail = "; ".join(parts)
        evidence.update(how="+".join(hows))
        right = [g.input for g in first.inputs if g.verdict == "ok"]
        if right:
            detail += f"; the gradient of {right[0]} matches the reference" if len(right) == 1 else f"; the gradients of {listed(right)} match the reference"
    verb = "gets" if len(inputs) == 1 else "get"
    message = f"{listed(inputs)} {verb} no gradient from the output: {detail} ({first.probe.name}, gradients of sum(output * G))"
    d = Diagnosis.of("not-differentiable", message, evidence, failed)
    if first.error is not None and first.status in ("raised", "failed") and inplace.is_in_place_error(first.error.message):
        # Nothing left the graph: an in-place operation changed what the backward needs. The fix
        # says so (not .detach() or .numpy(), which are not there), and locate finds the statement.
        op = inplace.saved_by(first.error.message)
        evidence.update(in_place=True, **({"saved_by": op} if op else {}))
        return replace(d, message=message + "; an in-place operation changed a tensor the backward needs", evidence=evidence, fix=inplace.FIX)
    return d


def gradient_mismatch(verdicts: list[GradientVerdict], failed: tuple[str, ...]) -> Diagnosis | None:
    """Only where the very call's output is right: a wrong forward has wrong gradients anyway,
    and is named for what it does to the forward."""
    showing = [v for v in verdicts if v.status == "measured" and v.forward_ok and not v.without() and v.wrong()]
    if not showing:
        return None
    first = showing[0]
    wrong = first.wrong()
    worst = wrong[0]
    ratios = {g.input: round(r, 4) for g in first.inputs if (r := g.norm_ratio) is not None}
    what = f"the gradient of {wrong[0].input} does not" if len(wrong) == 1 else f"the gradients of {listed([g.input for g in wrong])} do not"
    message = f"the output matches the reference, but {what} ({first.probe.name}): {worst.summary}"
    if ratios:
        message += "; " + ", ".join(f"|d{x}| {r:.3g}" for x, r in ratios.items()) + " times the reference's"
    evidence: dict[str, Any] = {"inputs": [g.input for g in wrong], "probe": first.probe.name, "gradient_norm_ratio": ratios}
    if worst.mismatch is not None:
        evidence.update(worst.mismatch.as_dict())
    return Diagnosis.of("gradient-mismatch", message, evidence, failed)


def gradient_diagnoses(verdicts: list[GradientVerdict], run: WorkerRun, failed: tuple[str, ...], is_memory: Callable[[ErrorInfo], bool]) -> list[Diagnosis]:
    """not-differentiable and gradient-mismatch; a call or backward that ran out of memory under
    autograd is a memory-limit, not a gradient that does not exist."""
    short = [v for v in verdicts if v.error is not None and is_memory(v.error)]
    verdicts = [v for v in verdicts if not any(v is s for s in short)]
    found = [not_differentiable(verdicts, run, failed), gradient_mismatch(verdicts, failed)]
    if short:
        first = short[0]
        assert first.error is not None
        where = "the call" if first.status == "raised" else "the backward"
        found.insert(0, Diagnosis.of("memory-limit", f"{where} ran out of memory with inputs that require gradients on {first.probe.name}: {quote(first.error)}", {"probe": first.probe.name, "exception": first.error.type}, failed))
    return [d for d in found if d is not None]


def _norm_figures(verdicts: list[GradientVerdict]) -> tuple[str, dict[str, float]] | None:
    """The gradients' norms over the reference's, on the measured probe with the largest d_k
    (where a scale mistake shows most)."""
    measured = [v for v in verdicts if v.status == "measured" and all(g.norm_ratio is not None for g in v.inputs)]
    if not measured:
        return None
    best = max(measured, key=lambda v: (v.probe.Q.shape[-1], -v.probe.Q.ndim))
    return best.probe.name, {g.input: g.norm_ratio for g in best.inputs if g.norm_ratio is not None}


def with_gradient_norms(diagnoses: list[Diagnosis], verdicts: list[GradientVerdict]) -> list[Diagnosis]:
    """``scale-missing`` and ``scale-by-dk`` with the measured gradient norms in their message
    and evidence, when gradients were measured."""
    figures = _norm_figures(verdicts)
    if figures is None or not any(d.name in SCALE_NAMES for d in diagnoses):
        return diagnoses
    name, ratios = figures
    text = f"; gradients ({name}): " + ", ".join(f"|d{x}| {r:.3g}" for x, r in ratios.items()) + " times the reference's"
    out = []
    for d in diagnoses:
        if d.name in SCALE_NAMES:
            evidence = {**d.evidence, "gradient_norm_ratio": {x: round(r, 4) for x, r in ratios.items()}, "gradient_probe": name}
            d = replace(d, message=d.message + text + _through_softmax(d.evidence, ratios), evidence=evidence)
        out.append(d)
    return out


def _through_softmax(evidence: dict[str, Any], ratios: dict[str, float]) -> str:
    """dQ = s dS K and dK = s dS^T Q: with the scale s divided out of their ratios, about what is
    left is how much of the reference's gradient of the scores comes back through the softmax
    (less where it saturates toward one-hot rows)."""
    fitted, expected = evidence.get("fitted_scale"), evidence.get("expected_scale")
    if not isinstance(fitted, (int, float)) or not isinstance(expected, (int, float)) or fitted <= 0 or expected <= 0:
        return ""
    factor = fitted / expected
    through = (ratios["Q"] + ratios["K"]) / 2 / factor
    rows = "more peaked" if factor > 1 else "flatter"
    return f"; with the scale ({factor:.3g} times the reference's) divided out, about {through:.2g} of the reference's gradient comes back through the {rows} softmax"
