"""Naming mask mistakes from evidence: mask-ignored, mask-after-softmax, mask-inverted.

Masked probes are judged here, apart from the catalogue search (which replays unmasked variants).
The question for each masked case is what the submission did *with the mask*, whatever else it
gets wrong. So its masked weights W (V = identity) are compared with hypotheses built from a
baseline B, the weights the same Q and K get with no key masked:

* B is first the submission's own weights under a mask that keeps every key (the ``keep-all``
  probe), so a wrong scale or a transposed batch does not hide how the mask is handled;
* then the catalogue's variants (the reference and the known mistakes), which matters when the
  keep-all probe itself is broken, as with an inverted mask, where keeping everything masks
  everything.

With M the mask (True = keep): W = renorm(B * M) is correct handling; W = B is ``mask-ignored``;
W = B * M is ``mask-after-softmax``; W = renorm(B * ~M) is ``mask-inverted`` (compared on the rows
where ~M keeps something); W = B * ~M is both of the last two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.compare import close
from grader.diagnosis.catalogue import all_variants
from grader.diagnosis.describe import quote
from grader.diagnosis.model import Diagnosis
from grader.masks import KEEP_ALL
from grader.observation import Observation, WorkerRun
from grader.probes import Probe, probe_name
from grader.suite import Suite, Tolerance


@dataclass(frozen=True)
class _Hypothesis:
    """One way a mask may have been applied, with the weights it predicts."""

    names: tuple[str, ...]  # () is correct handling
    weights: np.ndarray
    rows: np.ndarray  # which rows to compare (boolean over the leading axes and T_q)


def _renorm(weights: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        total = weights.sum(axis=-1, keepdims=True)
        return np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)


def _hypotheses(base: np.ndarray, mask: np.ndarray) -> list[_Hypothesis]:
    every = np.ones(mask.shape[:-1], dtype=bool)
    inverted_rows = np.any(~mask, axis=-1)  # rows where the swapped mask keeps some key
    return [
        _Hypothesis((), _renorm(base * mask), every),
        _Hypothesis(("mask-ignored",), base, every),
        _Hypothesis(("mask-after-softmax",), base * mask, every),
        _Hypothesis(("mask-inverted",), _renorm(base * ~mask), inverted_rows),
        _Hypothesis(("mask-inverted", "mask-after-softmax"), base * ~mask, inverted_rows),
    ]


def _usable(obs: Observation | None, shape: tuple[int, ...]) -> np.ndarray | None:
    if obs is None or obs.status != "returned" or obs.value is None or obs.value.array is None:
        return None
    array = obs.value.array
    if array.shape != shape or array.dtype.kind not in "fiu":
        return None
    return array.astype(np.float64)


def _baselines(probe: Probe, keep_all: np.ndarray | None) -> list[np.ndarray]:
    out = []
    if keep_all is not None and np.all(np.isfinite(keep_all)):
        out.append(keep_all)
    for variant in all_variants():
        try:
            with np.errstate(all="ignore"):
                weights = variant(probe.Q, probe.K, probe.V)  # V is the identity: the output is the weights
        except Exception:  # a mistake that breaks the shapes of this case
            continue
        if probe.mask is not None and weights.shape == probe.mask.shape:
            out.append(weights)
    return out


def classify(weights: np.ndarray, probe: Probe, keep_all: np.ndarray | None, tolerance: Tolerance) -> tuple[str, ...] | None:
    """The mask mistakes that reproduce ``weights`` (() when the mask is handled correctly), or
    None when no hypothesis does."""
    assert probe.mask is not None
    for base in _baselines(probe, keep_all):
        for hypothesis in _hypotheses(base, probe.mask):
            rows = hypothesis.rows
            if rows.any() and close(weights[rows], hypothesis.weights[rows], tolerance):
                return hypothesis.names
    return None


def _figures(name: str, weights: np.ndarray, mask: np.ndarray) -> tuple[str, dict[str, Any]]:
    with np.errstate(all="ignore"):
        on_masked = np.where(mask, 0.0, weights).sum(axis=-1)
        on_kept = np.where(mask, weights, 0.0).sum(axis=-1)
        sums = weights.sum(axis=-1)
    has_masked = np.any(~mask, axis=-1)
    if name == "mask-ignored":
        share = float(on_masked[has_masked].mean())
        return (
            f"masked keys keep {100 * share:.1f} % of each row's weight on average (should be 0); "
            "the weights equal those with a mask that keeps every key",
            {"mean_weight_on_masked_keys": round(share, 6)},
        )
    if name == "mask-after-softmax":
        return (
            f"masked keys get 0 but rows sum to {float(sums.mean()):.3f} on average (min {float(sums.min()):.3f}) instead of 1: "
            "the weights were masked after the softmax and not renormalised",
            {"mean_row_sum": round(float(sums.mean()), 6), "min_row_sum": round(float(sums.min()), 6)},
        )
    share = float(on_kept[has_masked].mean())
    return (
        f"the keys the mask keeps get {100 * share:.1f} % of the weight on average and the masked keys the rest: True and False are swapped",
        {"mean_weight_on_kept_keys": round(share, 6)},
    )


def _raise_explained(probe: Probe, named: set[str]) -> bool:
    """A masked probe that raised is explained when a mistake already named raises on the same
    (unmasked) inputs, as `.T` on a batch does."""
    for variant in all_variants():
        labels = {o.diagnosis for o in variant.deviations}
        if not labels or not labels <= named:
            continue
        try:
            variant(probe.Q, probe.K, probe.V)
        except Exception:
            return True
    return False


def _shapes(probe: Probe) -> str:
    assert probe.mask is not None
    return f"Q{tuple(probe.Q.shape)}, K{tuple(probe.K.shape)}, V{tuple(probe.V.shape)}, mask{tuple(probe.mask.shape)}"


def mask_diagnoses(suite: Suite, probes: list[Probe], run: WorkerRun, failed: tuple[str, ...], named: set[str]) -> list[Diagnosis]:
    """Diagnoses from the masked probes; ``named`` are the mistakes the unmasked probes showed."""
    masked = [p for p in probes if p.mask is not None and p.kind != KEEP_ALL]
    if not masked:
        return []
    found: dict[str, Diagnosis] = {}
    for probe in masked:
        obs = run.get(probe.name)
        if obs is None:
            continue  # the run stopped early: timeout or crash is already reported
        case = suite.cases[probe.case]
        described = case.mask.describe() if case.mask else "mask"
        if obs.status == "raised":
            assert obs.error is not None
            if "crash" not in found and not _raise_explained(probe, named):
                where = f" at {obs.error.where}" if obs.error.line else ""
                found["crash"] = Diagnosis.of(
                    "crash",
                    f"raises {quote(obs.error)}{where} with a {described} ({_shapes(probe)})",
                    {"probe": probe.name, "exception": obs.error.type, "exception_message": obs.error.message, "line": obs.error.line},
                    failed,
                )
            continue
        if probe.kind != "identity":
            continue
        weights = _usable(obs, probe.mask.shape)  # type: ignore[union-attr]
        if weights is None:
            if "bad-return" not in found and obs.value is not None:
                shape = tuple(obs.value.array.shape) if obs.value.array is not None else obs.value.type
                found["bad-return"] = Diagnosis.of("bad-return", f"returns {shape} for {_shapes(probe)}", {"probe": probe.name}, failed)
            continue
        keep_all = _usable(run.get(probe_name(probe.case, KEEP_ALL)), probe.mask.shape)  # type: ignore[union-attr]
        names = classify(weights, probe, keep_all, suite.tolerance)
        for name in names or ():
            if name not in found:
                message, evidence = _figures(name, weights, probe.mask)  # type: ignore[arg-type]
                found[name] = Diagnosis.of(name, f"{probe.case} ({described}): {message}", {"probe": probe.name, **evidence}, failed)
    return list(found.values())
