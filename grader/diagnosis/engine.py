"""From observations to named mistakes.

The order of questions, each answered from evidence:

1. Did the worker load the file and find the function? (load-error, function-missing)
2. Did it stop early? (timeout, memory-limit, crash of the interpreter)
3. Which smallest set of known mistakes reproduces every observed probe? The catalogue's variants
   are replayed on the same inputs in this process and compared with what the submission did,
   raised exceptions included.
4. If no set explains everything: what each group of probes (single sequences, batches) shows on
   its own, the fitted scale, and the exceptions; what stays unexplained is a crash, a bad return
   or a plain values mismatch, with its numbers.

Nothing here reads the submission's source: a location is attached afterwards, and only to a
diagnosis the evidence already produced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.checks.base import CheckResult
from grader.compare import close, compare
from grader.diagnosis.catalogue import REFERENCE, Variant, all_variants
from grader.diagnosis.masks import mask_diagnoses
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.scale_fit import fit_scale, row_shape
from grader.frameworks import is_framework_memory_error
from grader.observation import Observation, WorkerRun
from grader.probes import Probe
from grader.suite import Suite, Tolerance

MEMORY_ERRORS = ("MemoryError", "numpy._core._exceptions._ArrayMemoryError", "numpy.core._exceptions._ArrayMemoryError")


@dataclass
class _Evidence:
    """The probes observed once, with what each variant predicts for them (computed lazily)."""

    suite: Suite
    probes: dict[str, Probe]
    observed: dict[str, Observation]
    predictions: dict[tuple[int, str], np.ndarray | BaseException]

    def predict(self, variant: Variant, probe: str) -> np.ndarray | BaseException:
        key = (id(variant), probe)
        if key not in self.predictions:
            p = self.probes[probe]
            try:
                with np.errstate(all="ignore"):
                    self.predictions[key] = variant(p.Q, p.K, p.V)
            except Exception as exc:  # numpy raises on shapes that a mistake breaks
                self.predictions[key] = exc
        return self.predictions[key]

    def matches(self, variant: Variant, probe: str) -> bool:
        obs = self.observed[probe]
        predicted = self.predict(variant, probe)
        if isinstance(predicted, BaseException):
            return obs.status == "raised"
        if obs.status != "returned" or obs.value is None or obs.value.array is None:
            return False
        actual = obs.value.array
        if actual.dtype.kind not in "fiu":
            return False
        return close(actual, predicted, self.suite.tolerance)


def clip(text: str, limit: int = 160) -> str:
    """Exception messages (numpy's above all) can run long; a diagnosis message stays readable."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_batched(probe: Probe) -> bool:
    return probe.Q.ndim > 2


def _shape_text(probe: Probe) -> str:
    return f"Q{tuple(probe.Q.shape)}, K{tuple(probe.K.shape)}, V{tuple(probe.V.shape)}"


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
        return [Diagnosis.of("function-missing", f"{suite.function}{load.signature} cannot be called with three arrays: {load.signature_error}", {"signature": load.signature}, failed)]

    by_name = {p.name: p for p in probes}
    # issue 6: masked probes are judged apart (grader/diagnosis/masks.py): the catalogue has no masks
    observed = {name: obs for (name, call), obs in run.observations.items() if call == 0 and name in by_name and by_name[name].mask is None}
    diagnoses = list(early)
    memory_probes = [
        n for n, o in observed.items()
        if o.status == "raised" and o.error is not None
        and (o.error.type in MEMORY_ERRORS or is_framework_memory_error(o.error.type, o.error.message))  # issue 6: torch / jax
    ]
    if memory_probes and not any(d.name == "memory-limit" for d in diagnoses):
        diagnoses.append(Diagnosis.of("memory-limit", f"MemoryError on {memory_probes[0]} ({_shape_text(by_name[memory_probes[0]])})", {"probe": memory_probes[0]}, failed))
    for name in memory_probes:
        del observed[name]

    evidence = _Evidence(suite, by_name, observed, {})
    for found in _explain(evidence, failed):
        if not any(d.name == found.name for d in diagnoses):  # one entry per mistake, first evidence wins
            diagnoses.append(found)
    for found in mask_diagnoses(suite, probes, run, failed, {d.name for d in diagnoses}):  # issue 6
        if not any(d.name == found.name for d in diagnoses):
            diagnoses.append(found)
    if failed and not any(d.severity == "error" for d in diagnoses):
        diagnoses.append(_unexplained(checks, failed))
    return _apply_severity(suite, diagnoses)


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
        return Diagnosis.of("function-missing", f"no callable named '{suite.function}'{found}", {"available": list(load.available)}, ("load",))
    error = load.error
    assert error is not None
    where = f" at {error.where}" if error.line else ""
    return Diagnosis.of("load-error", f"importing the file raised {clip(error.short)}{where}", {"exception": error.type, "message": error.message, "line": error.line, **({"cell": error.cell} if error.cell else {})}, ("load",))


def _explain(ev: _Evidence, failed: tuple[str, ...]) -> list[Diagnosis]:
    names = list(ev.observed)
    if not names:
        return []
    variants = all_variants()
    found = _search(ev, variants, names)
    if found is not None:
        return _describe(ev, found, names, failed)
    # No single set of mistakes explains every probe: look at single sequences and batches apart.
    singles = [n for n in names if not _is_batched(ev.probes[n])]
    batches = [n for n in names if _is_batched(ev.probes[n])]
    diagnoses: list[Diagnosis] = []
    single_variant = _search(ev, variants, singles) if singles else REFERENCE
    if single_variant is not None and not single_variant.is_reference:
        diagnoses += _describe(ev, single_variant, singles, failed)
    elif single_variant is None:
        diagnoses += _unexplained_probes(ev, singles, failed)
    if batches:
        # The single sequences fix the options visible there; batches may add a transpose mistake.
        base = single_variant or REFERENCE
        candidates = [v for v in variants if all(v.option(a) is base.option(a) for a in ("scale",))]
        batch_variant = _search(ev, candidates, batches)
        if batch_variant is not None:
            known = {d.name for d in diagnoses}
            diagnoses += [d for d in _describe(ev, batch_variant, batches, failed) if d.name not in known]
        else:
            diagnoses += _unexplained_probes(ev, batches, failed)
    return diagnoses


def _search(ev: _Evidence, variants: list[Variant], names: list[str]) -> Variant | None:
    """The variant with the fewest mistakes that reproduces every named probe."""
    for variant in variants:
        if all(ev.matches(variant, n) for n in names):
            return variant
    return None


def _describe(ev: _Evidence, variant: Variant, names: list[str], failed: tuple[str, ...]) -> list[Diagnosis]:
    out = []
    for option in variant.deviations:
        assert option.diagnosis is not None
        if option.diagnosis.startswith("scale-"):
            out.append(_scale_diagnosis(ev, option.diagnosis, option.name, names, failed))
        elif option.diagnosis == "batch-transpose":
            out.append(_transpose_diagnosis(ev, names, failed))
        else:
            out.append(Diagnosis.of(option.diagnosis, f"reproduced by the reference that {option.describe}", {"variant": variant.label()}, failed))
    return out


def _best_weight_probe(ev: _Evidence, names: list[str]) -> str | None:
    """The identity-V probe on a single sequence with the largest d_k: a wrong scale shows most there."""
    candidates = [n for n in names if ev.probes[n].kind == "identity" and not _is_batched(ev.probes[n])]
    candidates = [n for n in candidates if ev.observed[n].value is not None and ev.observed[n].value.array is not None]  # type: ignore[union-attr]
    if not candidates:
        return None
    return max(candidates, key=lambda n: ev.probes[n].Q.shape[-1])


def _scale_diagnosis(ev: _Evidence, name: str, option: str, names: list[str], failed: tuple[str, ...]) -> Diagnosis:
    probe_name = _best_weight_probe(ev, names)
    evidence: dict[str, Any] = {"reproduced_by": f"scores scaled by {option}"}
    message = f"the weights are reproduced with scores scaled by {option}"
    if probe_name is not None:
        probe = ev.probes[probe_name]
        d_k = probe.Q.shape[-1]
        weights = ev.observed[probe_name].value.array  # type: ignore[union-attr]
        fit = fit_scale(probe.Q, probe.K, weights)
        reference = REFERENCE(probe.Q, probe.K, probe.V)
        expected = 1.0 / math.sqrt(d_k)
        if fit is not None:
            evidence.update(probe=probe_name, d_k=d_k, fitted_scale=round(fit.scale, 6), expected_scale=round(expected, 6), fit_r2=round(fit.r2, 6))
            message = f"effective scale {fit.scale:.4g} where 1/sqrt(d_k) = {expected:.4g} (d_k = {d_k}, {probe_name}); reproduced by scaling with {option}"
        mine, ref = row_shape(weights), row_shape(reference)
        if mine is not None and ref is not None:
            evidence.update(mean_max_weight=round(mine.max_weight, 4), reference_mean_max_weight=round(ref.max_weight, 4), mean_row_entropy=round(mine.entropy, 4), reference_mean_row_entropy=round(ref.entropy, 4))
            look = "flatter" if mine.entropy > ref.entropy else "more peaked"
            message += f"; rows are {look} than the reference's (mean max weight {mine.max_weight:.3f} vs {ref.max_weight:.3f})"
    return Diagnosis.of(name, message, evidence, failed)


def _transpose_diagnosis(ev: _Evidence, names: list[str], failed: tuple[str, ...]) -> Diagnosis:
    raised = [n for n in names if _is_batched(ev.probes[n]) and ev.observed[n].status == "raised"]
    mixed = [n for n in names if _is_batched(ev.probes[n]) and ev.observed[n].status == "returned"]
    parts = []
    evidence: dict[str, Any] = {}
    if raised:
        obs = ev.observed[raised[0]]
        assert obs.error is not None
        parts.append(f"raises {clip(obs.error.short)} on {_shape_text(ev.probes[raised[0]])}")
        evidence.update(raised_on=raised[0], exception=obs.error.type, exception_message=obs.error.message, line=obs.error.line)
    if mixed:
        name = mixed[0]
        probe = ev.probes[name]
        reference = REFERENCE(probe.Q, probe.K, probe.V)
        actual = ev.observed[name].value.array  # type: ignore[union-attr]
        if actual is not None and actual.shape == reference.shape:
            diff = float(np.max(np.abs(actual.astype(np.float64) - reference)))
            parts.append(f"runs silently on {_shape_text(probe)} but mixes batch elements (max abs diff {diff:.3g})")
            evidence.update(silent_on=name, max_abs_diff=round(diff, 6))
    message = "; ".join(parts) or "batched results are reproduced by reversing every axis of K"
    return Diagnosis.of("batch-transpose", message + "; reproduced by K.T reversing every axis", evidence, failed)


def _unexplained_probes(ev: _Evidence, names: list[str], failed: tuple[str, ...]) -> list[Diagnosis]:
    """What one group of probes shows when no catalogue variant reproduces it: an exception, a bad
    return, or a values mismatch with the fitted scale."""
    for name in names:
        obs = ev.observed[name]
        if obs.status == "raised":
            assert obs.error is not None
            where = f" at {obs.error.where}" if obs.error.line else ""
            return [Diagnosis.of("crash", f"raises {clip(obs.error.short)}{where} on valid input {_shape_text(ev.probes[name])}", {"probe": name, "exception": obs.error.type, "exception_message": obs.error.message, "line": obs.error.line}, failed)]
    for name in names:
        obs = ev.observed[name]
        probe = ev.probes[name]
        expected = REFERENCE(probe.Q, probe.K, probe.V)
        value = obs.value
        assert value is not None
        if value.array is None:
            return [Diagnosis.of("bad-return", f"returns {value.type}, not an array, for {_shape_text(probe)}", {"probe": name, "type": value.type}, failed)]
        if value.array.shape != expected.shape:
            return [Diagnosis.of("bad-return", f"returns shape {tuple(value.array.shape)} for {_shape_text(probe)}, expected {tuple(expected.shape)}", {"probe": name, "shape": list(value.array.shape), "expected_shape": list(expected.shape)}, failed)]
        if value.array.dtype.kind not in "fiu":
            return [Diagnosis.of("bad-return", f"returns dtype {value.array.dtype}, expected floating point", {"probe": name, "dtype": str(value.array.dtype)}, failed)]
    for name in names:
        probe = ev.probes[name]
        actual = ev.observed[name].value.array  # type: ignore[union-attr]
        assert actual is not None
        mismatch = compare(actual, REFERENCE(probe.Q, probe.K, probe.V), ev.suite.tolerance)
        if not mismatch.ok:
            evidence: dict[str, Any] = {"probe": name, **mismatch.as_dict()}
            message = f"{name}: {mismatch.describe()}"
            fit = fit_scale(probe.Q, probe.K, actual) if probe.kind == "identity" else None
            if fit is not None and fit.reliable:
                expected = 1.0 / math.sqrt(probe.Q.shape[-1])
                evidence.update(fitted_scale=round(fit.scale, 6), expected_scale=round(expected, 6))
                message += f"; effective scale {fit.scale:.4g} where 1/sqrt(d_k) = {expected:.4g}"
            return [Diagnosis.of("values-mismatch", message, evidence, failed)]
    return []


def _unexplained(checks: list[CheckResult], failed: tuple[str, ...]) -> Diagnosis:
    for check in checks:
        for case in check.cases:
            if not case.passed and case.mismatch is not None:
                return Diagnosis.of("values-mismatch", f"{check.id}, {case.case}: {case.summary}", {"check": check.id, "case": case.case, **case.mismatch.as_dict()}, failed)
    first = next(c for c in checks if c.id in failed)
    return Diagnosis.of("values-mismatch", f"{first.id}: {first.summary}", {"check": first.id}, failed)


def tolerance_note(tolerance: Tolerance) -> str:
    return f"|actual - expected| <= {tolerance.atol:g} + {tolerance.rtol:g} * |expected|"
