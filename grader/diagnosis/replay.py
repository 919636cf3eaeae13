"""Replaying the catalogue on the submission's own inputs, and searching it.

:class:`Evidence` holds the probes, what the submission returned for each, and the predictions of
the variants, cached stage by stage (the scaled scores are shared by every softmax mistake, the
weights by both return options), so that trying hundreds of variants costs a few milliseconds.

The search tries variants fewest mistakes first and, for each, the most discriminating probes
first (probes where all sizes differ and V is not the identity), so most variants are rejected by
their first comparison.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Union

import numpy as np

from grader.compare import close
from grader.diagnosis.catalogue import SCALE, SHIFT, SIZES, Option, Variant, all_variants, fitted_scale_option, softmax_variant, with_scale
from grader.diagnosis.scale_fit import fit_linear, fit_power, fit_scale
from grader.observation import Observation
from grader.probes import Probe
from grader.suite import Tolerance

Prediction = Union[np.ndarray, BaseException]

# exp() of a score below this in magnitude neither overflows nor underflows, even shifted by the
# maximum of the whole array: the shift mistakes change nothing there.
TAME = 300.0
_ROW_SHIFT = id(SHIFT.default)
OVERFLOW_ERRORS = ("OverflowError", "FloatingPointError", "ZeroDivisionError")
FIT_R2 = 0.9999  # a fit this good means "one scale explains these weights"
LAW_ERROR = 0.01  # a power law through fitted scales must hold within 1 % at every point


@dataclass
class Evidence:
    probes: dict[str, Probe]
    observed: dict[str, Observation]  # the first call of each probe
    tolerances: dict[str, Tolerance]  # per probe: large-input probes are judged more loosely
    _stages: dict[tuple[object, ...], Any] = field(default_factory=dict)  # predictions, shapes, flags
    _matches: dict[tuple[int, str], bool] = field(default_factory=dict)
    _verdicts: dict[tuple[str, int], bool] = field(default_factory=dict)
    _keep: list[Variant] = field(default_factory=list)  # fitted variants: their ids key the caches

    # -- predictions ---------------------------------------------------------------------------

    def predict(self, variant: Variant, name: str) -> Prediction:
        """What ``variant`` returns for probe ``name``: an array, or the exception it raises."""
        with np.errstate(all="ignore"):
            return self._predict(variant, name)

    def _predict(self, variant: Variant, name: str) -> Prediction:
        p = self.probes[name]
        scale, product, norm, shift, output = (id(o) for o in variant.choice)
        key: tuple[object, ...] = (name, scale, product)
        scores = self._stages.get(key)
        if scores is None:
            scores = self._stages[key] = _attempt(variant.scores, p.Q, p.K, p.V)
        if isinstance(scores, BaseException):
            return scores
        if shift != _ROW_SHIFT and self._tame(key, scores):
            shift = _ROW_SHIFT  # no exponent comes near over- or underflow: every shift gives the same weights
        key = (name, scale, product, norm, shift)
        weights = self._stages.get(key)
        if weights is None:
            weights = self._stages[key] = _attempt(softmax_variant, scores, variant.option("softmax").apply, "row" if shift == _ROW_SHIFT else variant.option("shift").apply)
        if isinstance(weights, BaseException):
            return weights
        if p.kind == "identity" and isinstance(weights, np.ndarray) and np.isfinite(weights).all():
            return weights  # weights @ I is exactly the weights: both return options agree here
        key = (name, scale, product, norm, shift, output)
        result = self._stages.get(key)
        if result is None:
            result = self._stages[key] = _attempt(variant.finish, weights, p.V)
        return result

    def _tame(self, key: tuple[object, ...], scores: np.ndarray) -> bool:
        tame_key = (*key, "tame")
        tame = self._stages.get(tame_key)
        if tame is None:
            finite = bool(np.isfinite(scores).all())
            tame = self._stages[tame_key] = finite and float(np.max(np.abs(scores), initial=0.0)) < TAME
        return bool(tame)

    # -- comparing -----------------------------------------------------------------------------

    def returned(self, name: str) -> np.ndarray | None:
        """The numeric array the submission returned for a probe, or None."""
        obs = self.observed.get(name)
        if obs is None or obs.status != "returned" or obs.value is None or obs.value.array is None:
            return None
        array = obs.value.array
        return array if array.dtype.kind in "fiu" else None

    def matches(self, variant: Variant, name: str) -> bool:
        key = (id(variant), name)
        found = self._matches.get(key)
        if found is None:
            with np.errstate(all="ignore"):
                found = self._matches[key] = self._agrees(variant, name)
        return found

    def _agrees(self, variant: Variant, name: str) -> bool:
        obs = self.observed[name]
        shaped = self._shape_agrees(variant, name)
        if shaped is not None:
            return shaped
        predicted = self._predict(variant, name)
        if isinstance(predicted, BaseException):
            return obs.status == "raised"
        if obs.status == "raised" and self.probes[name].magnitude > 1.0:
            # math.exp raises where np.exp gives inf: the same overflow, in pure Python.
            overflow = obs.error is not None and obs.error.type in OVERFLOW_ERRORS
            return overflow and not bool(np.isfinite(predicted).all())
        actual = self._as_float(name)
        if actual is None or actual.shape != predicted.shape:
            return False
        key = (name, id(predicted))  # predictions stay alive in the stage cache: ids are stable
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts[key] = agrees(actual, predicted, self.tolerances[name], loose=self.probes[name].magnitude > 1.0)
        return verdict

    def _as_float(self, name: str) -> np.ndarray | None:
        key = (name, "float64")
        if key not in self._stages:
            actual = self.returned(name)
            self._stages[key] = None if actual is None else actual.astype(np.float64)
        return self._stages[key]

    def _shape_agrees(self, variant: Variant, name: str) -> bool | None:
        """Decide from shapes alone where they suffice (no softmax computed): a variant that raises
        where the submission returned, or returns another shape, is out. None: values decide."""
        p = self.probes[name]
        key = (name, id(variant.option("product")), "shape")
        scores_shape = self._stages.get(key)
        if scores_shape is None:
            product = _attempt(variant.option("product").apply, p.Q, p.K)
            scores_shape = self._stages[key] = product if isinstance(product, BaseException) else product.shape
        raises: bool
        if isinstance(scores_shape, BaseException):
            raises, shape = True, None
        elif variant.option("output").apply == "weights":
            raises, shape = False, scores_shape
        else:
            shape = _matmul_shape(scores_shape, p.V.shape)
            raises = shape is None
        actual = self.returned(name)
        obs = self.observed[name]
        if obs.status == "raised" and not raises and p.magnitude > 1.0 and obs.error is not None and obs.error.type in OVERFLOW_ERRORS:
            return None  # an overflow: whether this variant overflows there is for its values to say
        if obs.status == "raised" or actual is None:
            return raises and obs.status == "raised"
        if raises or shape != actual.shape:
            return False
        return None

    def search(self, variants: list[Variant], names: list[str], known: list[str] = ()) -> Variant | None:  # type: ignore[assignment]
        """The first (fewest mistakes) variant that reproduces every named probe. ``known``:
        probes already compared (cached), checked first as they reject most cheaply."""
        ordered = list(known) + sorted((n for n in names if n not in known), key=lambda n: discrimination(self.probes[n]))
        for variant in variants:
            if all(self.matches(variant, n) for n in ordered):
                return variant
        return None

    def variants(self) -> list[Variant]:
        """The fixed catalogue plus, for this submission, variants with fitted scale factors."""
        extra = fitted_options(self)
        if not extra:
            return all_variants()
        base = [v for v in all_variants() if v.option("scale") is SCALE.default and len(v.deviations) <= 2]
        fitted = [with_scale(v, option) for option in extra for v in base]
        self._keep.extend(fitted)
        return sorted(all_variants() + fitted, key=lambda v: len(v.deviations))


def _attempt(function: Callable[..., np.ndarray], *args: object) -> Prediction:
    try:
        return function(*args)
    except Exception as exc:  # numpy raises where a mistake breaks the shapes
        return exc


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape of np.matmul(a, b) for arrays of at least two dimensions, or None if it raises."""
    if a[-1] != b[-2]:
        return None
    try:
        batch = np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        return None
    return (*batch, a[-2], b[-1])


def agrees(actual: np.ndarray, predicted: np.ndarray, tolerance: Tolerance, loose: bool = False) -> bool:
    """Same shape, non-finite values in the same places, and the rest within tolerance.

    ``loose`` (large inputs): overflow depends on the precision and the order of operations, so
    any non-finite value on one side only needs some non-finite value on the other.
    """
    with np.errstate(all="ignore"):
        a = actual if actual.dtype == np.float64 else actual.astype(np.float64)
        fa, fp = np.isfinite(a), np.isfinite(predicted)
        if loose and (not fa.all() or not fp.all()):
            return not fa.all() and not fp.all()
        if not np.array_equal(fa, fp):
            return False
        if fa.all():
            return close(a, predicted, tolerance)
        return close(a[fa], predicted[fp], tolerance) and bool(np.all(np.isnan(a[~fa]) == np.isnan(predicted[~fp])))


def discrimination(probe: Probe) -> tuple[int, ...]:
    """Sort key: the probes that tell the most mistakes apart first. A real V (the identity hides
    returns-weights), all sizes different (equal sizes hide which one a scale used), a batch (hides
    nothing a single sequence shows, and shows the transpose); large and fresh probes last."""
    sizes = {probe.Q.shape[-2], probe.K.shape[-2], probe.Q.shape[-1], probe.V.shape[-1]}
    return (int(probe.magnitude > 1.0), int(probe.fresh), -len(sizes), int(probe.kind != "identity"), -probe.Q.ndim)


# ---------------------------------------------------------------------------------------------
# Fitted scales


@dataclass(frozen=True)
class ScalePoint:
    probe: str
    sizes: dict[str, int]
    scale: float
    r2: float


def scale_points(ev: Evidence, linear: bool = False) -> list[ScalePoint]:
    """The effective scale fitted on each single-sequence weights probe where one scale explains
    the weights (a softmax of scaled scores, or with ``linear`` the scaled scores themselves)."""
    points = []
    for name, probe in ev.probes.items():
        if probe.kind != "identity" or probe.batched or probe.magnitude > 1.0 or name not in ev.observed:
            continue
        weights = ev.returned(name)
        if weights is None:
            continue
        fit = (fit_linear if linear else fit_scale)(probe.Q, probe.K, weights)
        if fit is not None and fit.r2 > FIT_R2 and fit.points >= 4 and np.isfinite(fit.scale) and fit.scale > 0:
            sizes = {size: int(measure(probe.Q, probe.K, probe.V)) for size, measure in SIZES.items()}
            points.append(ScalePoint(name, sizes, fit.scale, fit.r2))
    return points


def fitted_options(ev: Evidence) -> list[Option]:
    """Scale options fitted from the submission's weights that no fixed option already gives: a
    constant (the same scale on cases with different d_k), or c * size^p for d_k, T_k, T_q or d_v."""
    options: list[Option] = []
    for linear in (False, True):
        points = scale_points(ev, linear)
        if len({p.sizes["d_k"] for p in points}) < 2:
            continue
        scales = np.array([p.scale for p in points])
        candidates: list[Option] = []
        if scales.max() / scales.min() - 1.0 < LAW_ERROR:
            candidates.append(fitted_scale_option(None, float(np.median(scales)), 0.0))
        else:
            for size in ("d_k", "T_k", "T_q", "d_v"):
                law = fit_power([(p.sizes[size], p.scale) for p in points])
                if law is not None and law.worst < LAW_ERROR:
                    candidates.append(fitted_scale_option(size, law.c, law.p))
        for option in candidates:
            if not _given_by_fixed(option, ev):
                options.append(option)
    return options


def _given_by_fixed(option: Option, ev: Evidence) -> bool:
    """A fitted option that gives the same scale as a fixed one on every probe adds nothing."""
    return any(all(_same(option, fixed, probe) for probe in ev.probes.values()) for fixed in SCALE.options)


def _same(a: Option, b: Option, probe: Probe) -> bool:
    x = float(a.apply(probe.Q, probe.K, probe.V))
    y = float(b.apply(probe.Q, probe.K, probe.V))
    return abs(x - y) <= 0.005 * abs(y)
