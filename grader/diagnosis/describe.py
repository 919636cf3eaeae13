"""The figures that show each mistake, measured on the probes that reproduce it.

Each function turns a mistake the search found (or a probe nothing explains) into a Diagnosis
whose message carries numbers: the fitted scale beside 1/sqrt(d_k), how flat or peaked the rows
are, the row sums, the exception and the input shape, the mismatch statistics.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from grader.compare import compare
from grader.diagnosis.catalogue import REFERENCE, SCALE, ByRank, Option, Variant, causal, with_scale
from grader.diagnosis.crash_words import assumed_equal, crash_text, ranks_text as _ranks
from grader.diagnosis.model import Diagnosis
from grader.diagnosis.replay import Evidence, scale_points
from grader.diagnosis.scale_fit import fit_linear, fit_scale, row_shape
from grader.diagnosis.shift_words import shift_as_seen
from grader.diagnosis.stale import FIX as STALE_FIX
from grader.diagnosis.stale import stale_mismatch, stale_words
from grader.probes import LARGE_TOLERANCE, Probe

Failed = tuple[str, ...]


def clip(text: str, limit: int = 160) -> str:
    """Exception messages (numpy's above all) can run long; a diagnosis message stays readable."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3]
    space = cut.rfind(" ")
    if space >= limit // 2:  # at a word boundary, unless that loses half the text
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "..."


def quote(error: Any, limit: int = 140) -> str:
    """An exception as a message quotes it: type and text, cut at a word boundary (the full text
    is in the evidence); ErrorInfo.short cuts mid-word."""
    text = f"{error.type}: {error.message}" if error.message else error.type
    return clip(text, limit)


def shape_text(ev: Evidence, name: str) -> str:
    p = ev.probes[name]
    return f"Q{tuple(p.Q.shape)}, K{tuple(p.K.shape)}, V{tuple(p.V.shape)}"


def rank_text(ev: Evidence, name: str) -> str:
    return f"{ev.probes[name].Q.ndim}-D"


def describe(ev: Evidence, variant: Variant, names: list[str], failed: Failed) -> list[Diagnosis]:
    """One diagnosis per mistake of ``variant``, with figures from the probes in ``names``."""
    out: list[Diagnosis] = []
    folded = folded_options(variant)
    for option, name in ((o, n) for o in variant.deviations for n in o.names):
        if option in folded:
            continue  # right wherever the product is: part of the same single-rank code
        if any(d.name == name for d in out):
            continue  # two options of one mistake (axis -2 and a column maximum): reported once
        if option.also and option.name.startswith("1/sqrt(") and name == option.diagnosis and not any(not ev.probes[n].batched and ev.returned(n) is not None for n in names):
            continue  # d_v in 1/sqrt(V.shape[1]) is a single sequence's: seen only where one returns
        if name == "scale-after-softmax":
            out.append(after_softmax(ev, option, variant, names, failed))
        elif name.startswith("scale-"):
            out.append(scale(ev, option, name, variant, names, failed))
        elif name == "batch-transpose":
            out.append(transpose(ev, option, names, failed))
        elif name == "softmax-wrong-axis":
            out.append(wrong_axis(ev, option, names, failed))
        elif name == "softmax-missing":
            out.append(softmax_missing(ev, option, names, failed))
        elif name == "softmax-unstable":
            out.append(unstable(ev, shift_as_seen(ev, option, variant, names), names, failed))
        elif name == "returns-weights":
            out.append(returns_weights(ev, names, failed))
        elif name == "softmax-unnormalised":
            out.append(unnormalised(ev, option, names, failed))
        elif name == "softmax-log":
            out.append(log_weights(ev, option, names, failed))
        elif name == "mask-unasked":
            out.append(mask_unasked(ev, option, names, failed))
        elif name == "integer-truncation":
            out.append(truncation(ev, option, variant, names, failed))
        else:
            out.append(Diagnosis.of(name, f"reproduced by the reference that {option.describe}", {"variant": variant.label()}, failed))
        if "ndim" in option.name:
            out[-1] = _factor_by_rank(ev, out[-1], option, names)
        # The verdicts by rank compare the whole submission with the reference: they speak of
        # this mistake only when no other mistake shares the variant.
        alone = all(o is option or o in folded for o in variant.deviations)
        if alone and (option.right_on or len(option.names) > 1 or any(o in folded for o in variant.deviations)):
            out[-1] = _with_ranks(ev, out[-1], names, [o for o in variant.deviations if o in folded])
    return out


def folded_options(variant: Variant) -> list[Option]:
    """Options of code written for one rank that are right wherever its product is (K.T with a
    softmax over axis 1, both right for a single sequence): one mistake, named by the product."""
    product = variant.option("product")
    if not product.right_on:
        return []
    return [o for o in variant.deviations if o is not product and o.right_on and set(product.right_on) <= set(o.right_on)]


def _factor_by_rank(ev: Evidence, d: Diagnosis, option: Option, names: list[str]) -> Diagnosis:
    """A scale read from the rank (K.ndim): its factor on each rank, the one mistake on all."""
    factors: dict[str, float] = {}
    for n in names:
        p = ev.probes[n]
        factors.setdefault(f"{p.Q.ndim}-D", float(option.apply(p.Q, p.K, p.V)))
    if len(factors) < 2:
        return d
    listing = ", ".join(f"{f:.4g} on {rank}" for rank, f in sorted(factors.items()))
    message = f"{d.message}; the factor follows the rank, not d_k: {listing} input"
    return Diagnosis(d.code, d.name, d.severity, message, d.fix, {**d.evidence, "factor_by_rank": {r: round(f, 6) for r, f in sorted(factors.items())}}, d.checks, d.location)


def rank_verdicts(ev: Evidence, names: list[str]) -> dict[str, str]:
    """Per input rank over the ordinary probes: "right", "raises" or "wrong"."""
    verdicts: dict[str, str] = {}
    for n in names:
        p = ev.probes[n]
        if p.magnitude > 1.0:
            continue
        rank = f"{p.Q.ndim}-D"
        status = "raises" if ev.observed[n].status == "raised" else ("right" if _reference_agrees(ev, n) else "wrong")
        order = ("right", "raises", "wrong")
        if rank not in verdicts or order.index(status) > order.index(verdicts[rank]):
            verdicts[rank] = status
    return dict(sorted(verdicts.items()))


def _with_ranks(ev: Evidence, d: Diagnosis, names: list[str], folded: list[Option]) -> Diagnosis:
    verdicts = rank_verdicts(ev, names)
    if len(set(verdicts.values())) < 2:
        return d
    words = {"right": "right on", "raises": "raises on", "wrong": "wrong on"}
    parts = [f"{words[v]} {', '.join(r for r, x in verdicts.items() if x == v)} input" for v in ("right", "wrong", "raises") if v in verdicts.values()]
    message = f"{d.message}; by rank: {'; '.join(parts)}"
    evidence = {**d.evidence, "ranks": verdicts}
    if folded:
        message += f" (also {', '.join(o.name for o in folded)}, right for that rank only: code written for one rank)"
        evidence["written_for_one_rank"] = [o.name for o in folded]
    return Diagnosis(d.code, d.name, d.severity, message, d.fix, evidence, d.checks, d.location)


def on_ranks(ev: Evidence, d: Diagnosis, running: list[str], names: list[str]) -> Diagnosis:
    """A mistake named from the ranks where code written for some ranks only runs: which
    probes showed it, and the verdict on every rank (the others raise, the crash says where)."""
    ranks = sorted({ev.probes[n].Q.ndim for n in running})
    shown = ", ".join(running[:3]) + (", ..." if len(running) > 3 else "")
    where = " and ".join(f"{r}-D" for r in ranks)
    message = f"{d.message}; named from the {where} probes ({shown}), the only input the code runs on"
    evidence = {**d.evidence, "ranks": rank_verdicts(ev, names), "named_from": list(running)}
    return Diagnosis(d.code, d.name, d.severity, message, d.fix, evidence, d.checks, d.location)


def _normalised_axis(variant: Variant, ndim: int) -> int | None:
    """The one axis the variant's softmax normalises (as a negative axis), or None for several."""
    norm = variant.option("softmax").apply
    if isinstance(norm, ByRank):
        norm = norm.at(ndim) if norm.has(ndim) else None
    if isinstance(norm, str):
        return -1
    if isinstance(norm, tuple) and len(norm) == 1:
        return norm[0] - ndim if norm[0] >= 0 else norm[0]
    return None


def _tells_dv(probe: Any, rule: str) -> bool:
    """d_v differs from both sequence lengths: only there is a scale by d_v told from one by T."""
    return rule in ("scale-by-seq-len", "scale-by-dv") and probe.V.shape[-1] not in (probe.Q.shape[-2], probe.K.shape[-2])


def _weights_probes(ev: Evidence, names: list[str]) -> list[str]:
    """Identity-V probes (the output is the weight matrix) with an array returned, not large."""
    return [n for n in names if ev.probes[n].kind == "identity" and ev.probes[n].magnitude == 1.0 and ev.returned(n) is not None]


def _expected_scale(ev: Evidence, name: str) -> float:
    return 1.0 / math.sqrt(ev.probes[name].Q.shape[-1])


def scale(ev: Evidence, option: Option, rule: str, variant: Variant, names: list[str], failed: Failed) -> Diagnosis:
    candidates = _weights_probes(ev, names)
    if option.also:
        # One line, two mistakes (1/Q.shape[1]): the first shows on a single sequence, the
        # others on batches.
        batched = rule != option.diagnosis
        candidates = [n for n in candidates if ev.probes[n].batched == batched] or candidates
    evidence: dict[str, Any] = {"reproduced_by": f"scores scaled by {option.name}"}
    message = f"reproduced on every probe by the reference that {option.describe} ({option.name} where 1/sqrt(d_k) is expected)"
    if candidates:
        # The probe where this mistake moves the scale furthest from 1/sqrt(d_k) shows it best.
        # Stored probes first (the same figures on every run), fresh ones only if they alone show it.
        # For the second mistake of a line like 1/Q.shape[1], the distance from the first one.
        plain = next((o for o in SCALE.options if option.also and o.names == (option.diagnosis,) and rule != option.diagnosis), None)

        def distance(n: str) -> tuple[bool, bool, bool, float, int]:
            p = ev.probes[n]
            used = float(option.apply(p.Q, p.K, p.V))
            base = _expected_scale(ev, n) if plain is None else float(plain.apply(p.Q, p.K, p.V))
            far = abs(math.log(max(used, 1e-300) / base)) if math.isfinite(used) else 0.0
            return far > 1e-3, _tells_dv(p, rule), not p.fresh, far, p.Q.shape[-1]

        name = max(candidates, key=distance)
        probe = ev.probes[name]
        weights = ev.returned(name)
        assert weights is not None
        missing = variant.option("softmax").diagnosis == "softmax-missing"
        # A log, a cut to integers or a factor after the softmax leaves no softmax of scaled
        # scores to fit a scale to: the replay's verdict is the evidence there.
        unfit = variant.option("softmax").diagnosis == "softmax-log" or variant.option("integer").diagnosis is not None
        after = variant.option("scaled").diagnosis is not None
        fit = None if unfit or after else (fit_linear if missing else fit_scale)(probe.Q, probe.K, weights)
        expected = _expected_scale(ev, name)
        d_k, t_q, t_k, d_v = probe.Q.shape[-1], probe.Q.shape[-2], probe.K.shape[-2], probe.V.shape[-1]
        sizes = f"d_k = {d_k}, T_q = {t_q}, T_k = {t_k}, d_v = {d_v}" if rule in ("scale-by-seq-len", "scale-by-dv") else f"d_k = {d_k}"
        telling = next((n for n in names if _tells_dv(ev.probes[n], rule) and ev.returned(n) is not None and ev.probes[n].magnitude == 1.0 and ev.matches(variant, n)), None)
        if after and np.all(np.isfinite(weights)):
            used = float(option.apply(probe.Q, probe.K, probe.V))
            low, high = _sums(weights, -1)
            evidence.update(probe=name, d_k=d_k, factor=round(used, 6), expected_scale=round(expected, 6), row_sum_min=round(low, 6), row_sum_max=round(high, 6))
            message = f"the factor behind the softmax is {option.name} = {used:.4g} where 1/sqrt(d_k) = {expected:.4g} ({sizes}; rows sum to {_span(low, high)}; {name}, {rank_text(ev, name)}); reproduced by the reference that {option.describe}"
        if fit is not None and np.isfinite(fit.scale):
            evidence.update(probe=name, d_k=d_k, fitted_scale=round(fit.scale, 6), expected_scale=round(expected, 6), fit_r2=round(fit.r2, 6))
            message = f"effective scale {fit.scale:.4g} where 1/sqrt(d_k) = {expected:.4g} ({sizes}; {name}, {rank_text(ev, name)}); reproduced by the reference that {option.describe}"
        if telling is not None:
            # On V = identity d_v is T_k: only a probe where d_v differs from both lengths tells them apart.
            t = ev.probes[telling]
            what = "d_v" if rule == "scale-by-dv" else "a sequence length"
            message += f"; told from the neighbouring mistake on {telling} ({shape_text(ev, telling)}: d_v = {t.V.shape[-1]}, T_q = {t.Q.shape[-2]}, T_k = {t.K.shape[-2]}), reproduced only by a scale of {what}"
            evidence["told_apart_on"] = telling
        if rule in ("scale-constant", "scale-other"):
            points = [p for p in scale_points(ev, linear=missing) if not ev.probes[p.probe].fresh]
            if len(points) >= 2:
                shown = sorted(points, key=lambda p: p.sizes["d_k"])[:5]
                if option.name == "fitted per d_k":
                    shown = []  # the option's own description lists them already
                evidence["fitted_scales"] = [{"probe": p.probe, **p.sizes, "scale": round(p.scale, 6)} for p in sorted(points, key=lambda p: p.sizes["d_k"])[:5]]
                listing = ", ".join(f"{p.scale:.4g} at d_k = {p.sizes['d_k']}" for p in shown)
                message += f"; fitted per case: {listing}" if listing else ""
                if rule == "scale-constant":
                    message += " (the same whatever d_k is)"
            if rule == "scale-other":
                evidence["formula"] = option.name
        if not (missing or unfit or after):
            # Over the rows the submission normalises, against the same code with the right scale
            # (the reference itself where the softmax is right).
            axis = _normalised_axis(variant, weights.ndim)
            same = REFERENCE if variant.option("softmax").diagnosis is None else with_scale(variant, SCALE.default)
            if axis is not None:
                mine, ref = row_shape(np.moveaxis(weights, axis, -1)), row_shape(np.moveaxis(same.weights(probe.Q, probe.K, probe.V), axis, -1))
            else:
                mine = ref = None
            if mine is not None and ref is not None:
                evidence.update(mean_max_weight=round(mine.max_weight, 4), reference_mean_max_weight=round(ref.max_weight, 4), mean_row_entropy=round(mine.entropy, 4), reference_mean_row_entropy=round(ref.entropy, 4), rows_over_axis=axis)
                flatter, lower = mine.entropy > ref.entropy, mine.max_weight < ref.max_weight
                look = ("flatter" if flatter else "more peaked") if flatter == lower else "differently spread"
                rows = "rows" if axis == -1 else f"the distributions over axis {axis}"
                whose = "the reference's" if same is REFERENCE else "those of the right scale"
                message += f"; {rows} are {look} than {whose} (mean max weight {mine.max_weight:.3f} vs {ref.max_weight:.3f}, mean entropy {mine.entropy:.3f} vs {ref.entropy:.3f} nats)"
    return Diagnosis.of(rule, message, evidence, failed)


def transpose(ev: Evidence, option: Option, names: list[str], failed: Failed) -> Diagnosis:
    batched = [n for n in names if ev.probes[n].batched and ev.probes[n].magnitude == 1.0]
    raised = [n for n in batched if ev.observed[n].status == "raised"]
    silent = [n for n in batched if ev.returned(n) is not None]
    parts = []
    evidence: dict[str, Any] = {"reproduced_by": option.name}
    if raised:
        error = ev.observed[raised[0]].error
        assert error is not None
        parts.append(f"raises {quote(error)} on {shape_text(ev, raised[0])}")
        evidence.update(raised_on=raised[0], exception=error.type, exception_message=error.message, line=error.line)
    for name in silent:
        probe = ev.probes[name]
        actual = ev.returned(name)
        assert actual is not None
        reference = REFERENCE(probe.Q, probe.K, probe.V)
        if actual.shape == reference.shape:
            diff = float(np.max(np.abs(actual.astype(np.float64) - reference)))
            parts.append(f"runs silently on {shape_text(ev, name)} but mixes batch elements (max abs diff {diff:.3g})")
            evidence.update(silent_on=name, max_abs_diff=round(diff, 6))
        else:
            parts.append(f"runs on {shape_text(ev, name)} but returns shape {tuple(actual.shape)} instead of {tuple(reference.shape)}")
            evidence.update(silent_on=name, shape=list(actual.shape), expected_shape=list(reference.shape))
        break
    message = "; ".join(parts) or "batched results are reproduced by reversing every axis of K"
    return Diagnosis.of("batch-transpose", f"{message}; reproduced by the reference that {option.describe}", evidence, failed)


def _sums(weights: np.ndarray, axis: int) -> tuple[float, float]:
    sums = np.sum(weights.astype(np.float64), axis=axis)
    return float(np.min(sums)), float(np.max(sums))


def wrong_axis(ev: Evidence, option: Option, names: list[str], failed: Failed) -> Diagnosis:
    candidates = [n for n in _weights_probes(ev, names) if np.all(np.isfinite(ev.returned(n)))]  # type: ignore[arg-type]
    message = f"the weights are reproduced by the reference that {option.describe}"
    evidence: dict[str, Any] = {"reproduced_by": f"softmax over {option.name}"}
    if candidates:
        def off(n: str) -> tuple[bool, bool, float]:
            low, high = _sums(ev.returned(n), -1)  # type: ignore[arg-type]
            far = max(abs(low - 1.0), abs(high - 1.0))
            return far > 1e-6, not ev.probes[n].fresh, far

        name = max(candidates, key=off)
        weights = ev.returned(name)
        assert weights is not None
        low, high = _sums(weights, -1)
        col_low, col_high = _sums(weights, -2)
        evidence.update(probe=name, row_sum_min=round(low, 6), row_sum_max=round(high, 6), column_sum_min=round(col_low, 6), column_sum_max=round(col_high, 6), total=round(float(np.sum(weights)), 6))
        message = f"rows of the weights sum to {low:.3g}..{high:.3g} instead of 1 ({name}, {shape_text(ev, name)})"
        if max(abs(low - 1.0), abs(high - 1.0)) < 1e-6:
            # The normalisation is right; the shift before it is not constant within a row.
            probe = ev.probes[name]
            diff = float(np.max(np.abs(weights.astype(np.float64) - REFERENCE.weights(probe.Q, probe.K, probe.V))))
            evidence["max_abs_diff"] = diff
            message = f"rows of the weights sum to 1, yet differ from a softmax over the keys by up to {diff:.3g} ({name}, {shape_text(ev, name)})"
        elif abs(col_low - 1.0) < 1e-6 and abs(col_high - 1.0) < 1e-6:
            message += "; every column sums to 1 instead"
        elif abs(float(np.sum(weights)) - 1.0) < 1e-6:
            message += "; the whole matrix sums to 1 instead"
        message += f"; reproduced by the reference that {option.describe}"
    return Diagnosis.of("softmax-wrong-axis", message, evidence, failed)


def softmax_missing(ev: Evidence, option: Option, names: list[str], failed: Failed) -> Diagnosis:
    candidates = [n for n in _weights_probes(ev, names) if np.all(np.isfinite(ev.returned(n)))]  # type: ignore[arg-type]
    message = f"reproduced by the reference that {option.describe}"
    evidence: dict[str, Any] = {"reproduced_by": "no softmax"}
    if candidates:
        name = max(candidates, key=lambda n: ev.probes[n].Q.shape[-1])
        weights = ev.returned(name)
        assert weights is not None
        low, high = _sums(weights, -1)
        smallest = float(np.min(weights))
        evidence.update(probe=name, min_weight=round(smallest, 6), row_sum_min=round(low, 6), row_sum_max=round(high, 6))
        message = f"the weights (V = identity, {name}) are the scaled scores themselves: smallest weight {smallest:.3g}, rows sum to {low:.3g}..{high:.3g} instead of 1; reproduced by the reference with no softmax"
    return Diagnosis.of("softmax-missing", message, evidence, failed)


# exp() of more than this is inf in float64.
EXP_LIMIT = float(np.log(np.finfo(np.float64).max))


def collapsed_rows(probe: Probe, actual: np.ndarray) -> np.ndarray | None:
    """The rows (queries) of a result that are all 0 where the reference's are not, when each of
    them is a row whose largest score overflows exp: the log-sum-exp written without the shift,
    exp(s - log(sum(exp(s)))), gives exp(s - inf) = 0 there. None when the result differs from
    the reference in any other way."""
    reference = REFERENCE(probe.Q, probe.K, probe.V)
    if actual.shape != reference.shape:
        return None
    a = actual.astype(np.float64)
    wrong = ~np.isclose(a, reference, rtol=LARGE_TOLERANCE.rtol, atol=LARGE_TOLERANCE.atol).all(axis=-1)
    top = np.max(REFERENCE.scores(probe.Q, probe.K, probe.V), axis=-1)
    if not wrong.any() or np.any(a[wrong] != 0) or np.any(top[wrong] <= EXP_LIMIT):
        return None
    return wrong


def unstable(ev: Evidence, option: Option, names: list[str], failed: Failed, replayed: bool = True) -> Diagnosis:
    large = [n for n in names if ev.probes[n].magnitude > 1.0 and ev.returned(n) is not None]
    raised = [n for n in names if ev.probes[n].magnitude > 1.0 and ev.observed[n].status == "raised"]
    evidence: dict[str, Any] = {"reproduced_by": option.name}
    message = f"reproduced by the reference that {option.describe}"
    if raised and not large:
        name = raised[0]
        probe = ev.probes[name]
        error = ev.observed[name].error
        assert error is not None
        top = float(np.max(np.abs(REFERENCE.scores(probe.Q, probe.K, probe.V))))
        evidence.update(probe=name, exception=error.type, exception_message=error.message, line=error.line, max_abs_score=round(top, 1), magnitude=probe.magnitude)
        message = (
            f"on inputs {probe.magnitude:g} times larger ({name}, scores up to {top:.0f}) it raises {quote(error)}; "
            f"the reference stays finite there; the same overflow as the reference that {option.describe}"
        )
    if large:
        name = sorted(large, key=lambda n: ev.probes[n].kind != "identity")[0]
        probe = ev.probes[name]
        actual = ev.returned(name)
        assert actual is not None
        bad = int(np.count_nonzero(~np.isfinite(actual.astype(np.float64))))
        top = float(np.max(np.abs(REFERENCE.scores(probe.Q, probe.K, probe.V))))
        reference = REFERENCE.weights(probe.Q, probe.K, probe.V)
        sums = np.sum(reference, axis=-1)
        evidence.update(probe=name, nonfinite=bad, total=int(actual.size), max_abs_score=round(top, 1), magnitude=probe.magnitude)
        message = (
            f"on inputs {probe.magnitude:g} times larger ({name}, scores up to {top:.0f}), {bad} of {actual.size} returned values are nan or inf; "
            f"the reference stays finite there with rows summing to {float(np.min(sums)):.6g}; reproduced by the reference that {option.describe}"
        )
    if not replayed:
        # The exact values match no variant; the overflow alone is the evidence.
        message = message.split("; reproduced by")[0].split("; the same overflow as")[0]
        message += "; only the large-score probes fail, and only with non-finite values: exp of unshifted scores overflows"
        evidence["replayed"] = False
        collapsed = [(n, rows) for n in large if (actual := ev.returned(n)) is not None and (rows := collapsed_rows(ev.probes[n], actual)) is not None]
        if collapsed and not evidence.get("nonfinite"):
            name, rows = collapsed[0]
            probe = ev.probes[name]
            top = float(np.max(REFERENCE.scores(probe.Q, probe.K, probe.V)))
            evidence.update(probe=name, zero_rows=int(rows.sum()), rows=int(rows.size))
            message = (
                f"on inputs {probe.magnitude:g} times larger ({name}, scores up to {top:.0f}), {int(rows.sum())} of {rows.size} rows are all 0, "
                f"each a row whose largest score is past {EXP_LIMIT:.0f}, where exp overflows: the log of a sum of unshifted exponentials is inf there, and exp(s - inf) = 0"
            )
    return Diagnosis.of("softmax-unstable", message, evidence, failed)


def returns_weights(ev: Evidence, names: list[str], failed: Failed) -> Diagnosis:
    values = [n for n in names if ev.probes[n].kind == "values" and ev.returned(n) is not None and ev.probes[n].magnitude == 1.0]
    evidence: dict[str, Any] = {}
    message = "the output equals the attention weights on every probe"
    if values:
        # A probe where T_k != d_v shows it in the shape already.
        name = max(values, key=lambda n: (ev.probes[n].K.shape[-2] != ev.probes[n].V.shape[-1], -ev.probes[n].Q.ndim))
        probe = ev.probes[name]
        actual = ev.returned(name)
        assert actual is not None
        expected = (*probe.Q.shape[:-1], probe.V.shape[-1])
        evidence.update(probe=name, shape=list(actual.shape), expected_shape=list(expected))
        message = f"returns shape {tuple(actual.shape)} = (..., T_q, T_k) for {shape_text(ev, name)} where (..., T_q, d_v) = {expected} is expected"
        weights = REFERENCE.weights(probe.Q, probe.K, probe.V)
        if actual.shape == weights.shape:
            diff = float(np.max(np.abs(actual.astype(np.float64) - weights)))
            evidence["max_abs_diff_from_weights"] = diff
            message += f"; it is the weight matrix (max abs diff from the reference weights {diff:.3g})"
    return Diagnosis.of("returns-weights", message, evidence, failed)


def _span(low: float, high: float) -> str:
    return f"{low:.4g}" if abs(high - low) <= 1e-9 * max(1.0, abs(high)) else f"{low:.4g}..{high:.4g}"


def _finite_weights(ev: Evidence, names: list[str]) -> list[str]:
    """Weights probes with every returned value finite, stored ones first, then larger d_k first."""
    found = [n for n in _weights_probes(ev, names) if np.all(np.isfinite(ev.returned(n)))]  # type: ignore[arg-type]
    return sorted(found, key=lambda n: (ev.probes[n].fresh, -ev.probes[n].Q.shape[-1]))


def after_softmax(ev: Evidence, option: Option, variant: Variant, names: list[str], failed: Failed) -> Diagnosis:
    factor_option = variant.option("scale")
    candidates = _finite_weights(ev, names)
    evidence: dict[str, Any] = {"reproduced_by": f"the weights multiplied by {factor_option.name} after the softmax"}
    message = f"reproduced on every probe by the reference that {option.describe} ({factor_option.name})"
    if candidates:
        name = candidates[0]
        probe = ev.probes[name]
        weights = ev.returned(name)
        assert weights is not None
        low, high = _sums(weights, -1)
        factor = float(factor_option.apply(probe.Q, probe.K, probe.V))
        evidence.update(probe=name, d_k=probe.Q.shape[-1], factor=round(factor, 6), row_sum_min=round(low, 6), row_sum_max=round(high, 6))
        message = f"rows of the weights sum to {_span(low, high)} instead of 1: {factor_option.name} = {factor:.4g} at d_k = {probe.Q.shape[-1]} ({name}, {shape_text(ev, name)})"
        fit = fit_scale(probe.Q, probe.K, weights)
        if fit is not None and fit.reliable and variant.option("softmax").diagnosis is None:
            evidence.update(fitted_scale_within_rows=round(fit.scale, 6))
            message += f"; within each row the weights are a softmax of scores scaled by {fit.scale:.4g}, not 1/sqrt(d_k) = {_expected_scale(ev, name):.4g}"
        message += f"; reproduced by the reference that {option.describe}"
    return Diagnosis.of("scale-after-softmax", message, evidence, failed)


def unnormalised(ev: Evidence, option: Option, names: list[str], failed: Failed) -> Diagnosis:
    candidates = _finite_weights(ev, names)
    evidence: dict[str, Any] = {"reproduced_by": option.name}
    message = f"reproduced on every probe by the reference that {option.describe}"
    if candidates:
        name = max(candidates, key=lambda n: (not ev.probes[n].fresh, max(abs(x - 1.0) for x in _sums(ev.returned(n), -1))))  # type: ignore[arg-type]
        weights = ev.returned(name)
        assert weights is not None
        low, high = _sums(weights, -1)
        tops = np.max(weights.astype(np.float64), axis=-1)
        evidence.update(probe=name, row_sum_min=round(low, 6), row_sum_max=round(high, 6), min_weight=round(float(np.min(weights)), 6))
        message = f"the weights (V = identity, {name}) are all positive but rows sum to {_span(low, high)} instead of 1"
        if np.allclose(tops, 1.0, rtol=1e-9, atol=0.0):
            evidence["row_max"] = 1.0
            message += "; each row's largest weight is exactly 1, exp(0) after the max shift"
        message += f"; reproduced by the reference that {option.describe}"
    return Diagnosis.of("softmax-unnormalised", message, evidence, failed)


def log_weights(ev: Evidence, option: Option, names: list[str], failed: Failed) -> Diagnosis:
    candidates = _finite_weights(ev, names)
    evidence: dict[str, Any] = {"reproduced_by": option.name}
    message = f"reproduced on every probe by the reference that {option.describe}"
    if candidates:
        name = candidates[0]
        weights = ev.returned(name)
        assert weights is not None
        with np.errstate(all="ignore"):
            low, high = _sums(np.exp(weights.astype(np.float64)), -1)
        top = float(np.max(weights))
        evidence.update(probe=name, max_weight=round(top, 6), exp_row_sum_min=round(low, 6), exp_row_sum_max=round(high, 6))
        message = f"the weights (V = identity, {name}) are at most {top:.3g}, never positive"
        if max(abs(low - 1.0), abs(high - 1.0)) < 1e-6:
            message += ", and their exponentials sum to 1 in every row: they are log-probabilities"
        else:
            message += f", and their exponentials sum to {_span(low, high)} per row"
        message += f"; reproduced by the reference that {option.describe}"
    return Diagnosis.of("softmax-log", message, evidence, failed)


def mask_unasked(ev: Evidence, option: Option, names: list[str], failed: Failed) -> Diagnosis:
    candidates = [n for n in _weights_probes(ev, names) if min(ev.probes[n].Q.shape[-2], ev.probes[n].K.shape[-2]) >= 2]
    evidence: dict[str, Any] = {"reproduced_by": "a causal mask" + (" on the weights after the softmax" if option.apply == "causal-after" else "")}
    message = f"reproduced on every probe by the reference that {option.describe}"
    if candidates:
        name = sorted(candidates, key=lambda n: (ev.probes[n].fresh, -ev.probes[n].K.shape[-2]))[0]
        probe = ev.probes[name]
        weights = ev.returned(name)
        assert weights is not None
        above = np.broadcast_to(~causal(weights.shape), weights.shape)
        w = weights.astype(np.float64)
        cut = int(np.count_nonzero(((w == 0.0) | np.isneginf(w)) & above))
        reference = REFERENCE.weights(probe.Q, probe.K, probe.V)
        share = float(np.mean(np.sum(np.where(above, reference, 0.0), axis=-1)))
        evidence.update(probe=name, zero_above_diagonal=cut, above_diagonal=int(np.count_nonzero(above)), reference_mean_weight_above_diagonal=round(share, 6))
        message = (
            f"{cut} of {int(np.count_nonzero(above))} weights above the diagonal (keys after the query's position) are 0 on {name} ({shape_text(ev, name)}), "
            f"a case with no mask, where the reference puts {100 * share:.1f} % of each row's weight on them on average; reproduced by the reference that {option.describe}"
        )
    return Diagnosis.of("mask-unasked", message, evidence, failed)


def _whole(values: np.ndarray) -> np.ndarray:
    finite = values[np.isfinite(values)]
    return np.abs(finite - np.round(finite)) <= 1e-9 * np.maximum(1.0, np.abs(finite))


def truncation(ev: Evidence, option: Option, variant: Variant, names: list[str], failed: Failed) -> Diagnosis:
    evidence: dict[str, Any] = {"reproduced_by": option.name}
    message = f"reproduced on every probe by the reference that {option.describe}"
    stored = sorted((n for n in names if ev.returned(n) is not None and ev.probes[n].magnitude == 1.0), key=lambda n: ev.probes[n].fresh)
    dtypes = sorted({str(ev.returned(n).dtype) for n in stored if ev.returned(n).dtype.kind in "iu"})  # type: ignore[union-attr]
    said = f"; returns {', '.join(dtypes)} arrays" if dtypes else ""
    if dtypes:
        evidence["dtype"] = dtypes
    if option.apply == "trunc-output":
        # The output shows it best where the reference has the most values away from whole numbers.
        candidates = sorted(stored, key=lambda n: (ev.probes[n].kind != "values", ev.probes[n].fresh))
        if candidates:
            name = candidates[0]
            probe = ev.probes[name]
            actual = ev.returned(name).astype(np.float64)  # type: ignore[union-attr]
            whole = int(np.count_nonzero(_whole(actual)))
            reference_whole = int(np.count_nonzero(_whole(REFERENCE(probe.Q, probe.K, probe.V))))
            zeros = int(np.count_nonzero(actual == 0.0))
            evidence.update(probe=name, whole_numbers=whole, zeros=zeros, values=int(actual.size), reference_whole_numbers=reference_whole)
            message = f"{whole} of {actual.size} returned values are whole numbers ({zeros} of them 0) on {name} ({shape_text(ev, name)}), where the reference has {reference_whole}{said}; reproduced by the reference that {option.describe}"
        return Diagnosis.of("integer-truncation", message, evidence, failed)
    candidates = [n for n in _finite_weights(ev, names) if np.all(ev.returned(n) > 0)]  # type: ignore[operator]
    if candidates:
        name = candidates[0]
        probe = ev.probes[name]
        weights = ev.returned(name).astype(np.float64)  # type: ignore[union-attr]
        # Within a row, log-weight differences are differences of the scores entering the
        # softmax: whole numbers when they were cut, whole multiples of the scale when the dot
        # products were cut before it.
        step = float(variant.option("scale").apply(probe.Q, probe.K, probe.V)) if option.apply == "trunc-raw" and variant.option("scaled").diagnosis is None else 1.0
        logs = np.log(weights)
        steps = (logs - np.max(logs, axis=-1, keepdims=True)) / step
        whole = int(np.count_nonzero(_whole(steps)))
        evidence.update(probe=name, step=round(step, 6), whole_steps=whole, weights=int(weights.size))
        unit = "whole numbers" if step == 1.0 else f"whole multiples of {step:.4g}, the scale"
        cut = "whole numbers" if step == 1.0 else "integers before they were scaled"
        message = (
            f"within each row the log-weight differences are {unit} ({whole} of {weights.size} weights on {name}, {shape_text(ev, name)}): "
            f"the scores entering the softmax were cut to {cut}{said}; reproduced by the reference that {option.describe}"
        )
    return Diagnosis.of("integer-truncation", message, evidence, failed)


# ---------------------------------------------------------------------------------------------
# What nothing in the catalogue explains


def crash(ev: Evidence, names: list[str], failed: Failed) -> Diagnosis | None:
    raised = [n for n in names if ev.observed[n].status == "raised"]
    if not raised:
        return None
    first = raised[0]
    error = ev.observed[first].error
    assert error is not None
    where = f" at {error.where}" if error.line else ""  # "line 7", or "cell 3, line 2" in a notebook
    message = f"raises {quote(error)}{where} on valid input {shape_text(ev, first)}"
    # Over every probe, not only this group's: "raises on 2-D and 4-D, runs on 3-D" tells a
    # solution written for one rank only.
    everywhere = list(ev.observed)
    ranks_raised = sorted({ev.probes[n].Q.ndim for n in everywhere if ev.observed[n].status == "raised"})
    ranks_ok = sorted({ev.probes[n].Q.ndim for n in everywhere if ev.observed[n].status == "returned"} - set(ranks_raised))
    if ranks_ok:
        message += f"; raises on {', '.join(f'{r}-D' for r in ranks_raised)} input, runs on {', '.join(f'{r}-D' for r in ranks_ok)} input"
    evidence: dict[str, Any] = {"probe": first, "exception": error.type, "exception_message": error.message, "line": error.line, "file": error.file, "code": error.code, "input_shape": shape_text(ev, first), "raised_on": len(raised), "probes": len(names)}
    if error.cell:
        evidence["cell"] = error.cell  # a notebook's: the location is then "cell N, line M"
    # Ranks, not shapes: the fix is shown to candidates, who are not told the stored cases.
    if ranks_ok:
        evidence.update(raises_on_ranks=ranks_raised, runs_on_ranks=ranks_ok)
        fix = (
            f"It runs on {_ranks(ranks_ok)} input only and raises {error.type} on {_ranks(ranks_raised)}: "
            "write it for any number of leading axes (swap only the last two axes of K, take d_k from the last axis, "
            "normalise over the last axis)."
        )
    elif sizes := assumed_equal(ev.probes, ev.observed):  # raises exactly where two sizes differ
        said, fix = crash_text(sizes, error.type)
        message, evidence["assumes"] = message + said, [a.equal for a, _, _ in sizes]
    elif any(ev.observed[n].status == "returned" for n in everywhere):
        # Some inputs of a rank raise and others of the same rank run: the sizes decide.
        fix = (
            f"It raises {error.type} on some inputs and runs on others of the same rank: a size written into the code "
            "(a reshape, a fixed d_k or sequence length) instead of read from the inputs' shapes is the likely cause. "
            "Fix the line that raises."
        )
    else:
        fix = f"It raises {error.type} on every input it was given ({_ranks(ranks_raised)}): fix the line that raises."
    return replace(Diagnosis.of("crash", message, evidence, failed), fix=fix)


def bad_return(ev: Evidence, names: list[str], failed: Failed) -> Diagnosis | None:
    for name in names:
        obs = ev.observed[name]
        value = obs.value
        if obs.status != "returned" or value is None:
            continue
        probe = ev.probes[name]
        expected = (*probe.Q.shape[:-1], probe.V.shape[-1])
        if value.array is None:
            return Diagnosis.of("bad-return", f"returns {clip(value.type, 80)}, not an array, for {shape_text(ev, name)}", {"probe": name, "type": value.type}, failed)
        if value.array.shape != expected:
            return Diagnosis.of("bad-return", f"returns shape {tuple(value.array.shape)} for {shape_text(ev, name)}, expected {expected}", {"probe": name, "shape": list(value.array.shape), "expected_shape": list(expected)}, failed)
        if value.array.dtype.kind not in "fiu":
            return Diagnosis.of("bad-return", f"returns dtype {value.array.dtype}, expected floating point", {"probe": name, "dtype": str(value.array.dtype)}, failed)
    return None


def mismatch(ev: Evidence, names: list[str], failed: Failed, rule: str = "values-mismatch", prefix: str = "") -> Diagnosis | None:
    for name in names:
        probe = ev.probes[name]
        actual = ev.returned(name)
        expected = REFERENCE(probe.Q, probe.K, probe.V)
        if actual is None or actual.shape != expected.shape:
            continue
        result = compare(actual, expected, ev.tolerances[name])
        if result.ok:
            continue
        evidence: dict[str, Any] = {"probe": name, "input_shape": shape_text(ev, name), **result.as_dict()}
        message = f"{prefix}{name} ({shape_text(ev, name)}): {result.describe()}"
        fit = fit_scale(probe.Q, probe.K, actual) if probe.kind == "identity" else None
        if fit is not None and fit.reliable:
            wanted = _expected_scale(ev, name)
            evidence.update(fitted_scale=round(fit.scale, 6), expected_scale=round(wanted, 6))
            message += f"; effective scale {fit.scale:.4g} where 1/sqrt(d_k) = {wanted:.4g}"
        return Diagnosis.of(rule, message, evidence, failed)
    return None


def unexplained(ev: Evidence, names: list[str], failed: Failed) -> list[Diagnosis]:
    """What a group of probes shows when no variant reproduces it: an exception, a bad return, or
    a values mismatch with its numbers."""
    for judge in (crash, bad_return, stale_mismatch, mismatch):
        found = judge(ev, names, failed)
        if found is not None:
            return [found]
    return []


def hardcoded(ev: Evidence, stored: list[str], fresh: list[str], failed: Failed) -> Diagnosis:
    failing = [n for n in fresh if not _reference_agrees(ev, n)]
    first = failing[0]
    error = ev.observed[first].error
    lead = f"all {len(stored)} stored probes match the reference, but {len(failing)} of {len(fresh)} fresh probes drawn at grading time do not: "
    evidence: dict[str, Any] = {"stored_probes": len(stored), "fresh_probes": len(fresh), "fresh_failing": len(failing), "probe": first, "input_shape": shape_text(ev, first)}
    if error is not None:
        evidence.update(exception=error.type, exception_message=error.message, line=error.line, file=error.file, code=error.code)
        return Diagnosis.of("hardcoded", f"{lead}{first} ({shape_text(ev, first)}) raises {quote(error)}", evidence, failed)
    stale = stale_words(ev, first)
    if stale is not None:  # a result kept from an earlier call of the same shapes
        return replace(Diagnosis.of("hardcoded", f"{lead}{stale}", {**evidence, "stale": True}, failed), fix=STALE_FIX)
    found = mismatch(ev, [first], failed, "hardcoded", lead)
    if found is not None:
        return Diagnosis.of("hardcoded", found.message, {**evidence, **found.evidence}, failed)
    return Diagnosis.of("hardcoded", f"{lead}{first} ({shape_text(ev, first)}) returns no usable array", evidence, failed)


def _reference_agrees(ev: Evidence, name: str) -> bool:
    return ev.matches(REFERENCE, name)
