"""Replaying the catalogue on the submission's own inputs, and searching it.

:class:`Evidence` holds the probes, what the submission returned for each, and the verdicts of the
variants on them. Variants that differ only in their scale are replayed together: for one probe
and one choice of the other axes, the raw scores are scaled by every scale option at once (a stack
along a new first axis), passed through the softmax once, and compared with the observation in
one vectorised step, giving a verdict per scale. A variant that raises, or returns another shape,
is judged from shapes alone. So the whole catalogue costs a few milliseconds per probe.

The search tries variants fewest mistakes first and, for each, the most discriminating probes
first (probes where all sizes differ and V is not the identity), so most variants are rejected by
their first comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, Union

import numpy as np

from grader.checks.memo import OwnerMemo
from grader.diagnosis.catalogue import AXIS_NAMES, DOT_BOTH, ByRank, SCALE, SIZES, Catalogue, Option, Variant, all_variants, fitted_scale_option, fitted_scale_table, replay_stack, setting, tier, with_scale
from grader.diagnosis.scale_fit import fit_linear, fit_power, fit_scale
from grader.observation import Observation
from grader.probes import Probe
from grader.suite import Tolerance

Prediction = Union[np.ndarray, BaseException]

POSITION_PRODUCT = AXIS_NAMES.index("product")
OVERFLOW_ERRORS = ("OverflowError", "FloatingPointError", "ZeroDivisionError")

FIT_R2 = 0.9999  # a fit this good means "one scale explains these weights"
LAW_ERROR = 0.01  # a power law through fitted scales must hold within 1 % at every point


@dataclass
class Stack:
    """The predictions for one probe and one choice of the axes other than the scale, one per
    scale option (a stack along a new first axis), with what every comparison with them needs."""

    predicted: np.ndarray
    # Per scale: the variant raises on this probe (a size or an axis out of range); none by default.
    raises: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    axes: tuple[int, ...] = field(init=False)  # the axes of one prediction in the stack
    all_finite: np.ndarray = field(init=False)  # per scale: no NaN or inf anywhere
    _limits: dict[tuple[float, float], np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.axes = tuple(range(1, self.predicted.ndim))
        if len(self.raises) != len(self.predicted):
            self.raises = np.zeros(len(self.predicted), dtype=bool)
        self.all_finite = np.isfinite(self.predicted).all(axis=self.axes)

    def limit(self, tolerance: Tolerance) -> np.ndarray:
        """atol + rtol * |predicted|: how far from each predicted value a match may be."""
        key = (tolerance.atol, tolerance.rtol)
        found = self._limits.get(key)
        if found is None:
            with np.errstate(all="ignore"):
                found = self._limits[key] = tolerance.atol + tolerance.rtol * np.abs(self.predicted)
        return found

    def agrees(self, actual: np.ndarray, finite: bool, tolerance: Tolerance, loose: bool) -> np.ndarray:
        """agrees_stack(actual, predicted, ...), in fewer steps when ``actual`` is all finite:
        then a prediction agrees exactly when it is all finite and within tolerance everywhere
        (the same verdicts, loose or not: a non-finite value on one side only never agrees)."""
        if not finite:
            return agrees_stack(actual, self.predicted, tolerance, loose)
        return self.all_finite & (np.abs(actual - self.predicted) <= self.limit(tolerance)).all(axis=self.axes)


@dataclass(frozen=True)
class Raw:
    """The raw scores of one product option on one probe (or what it raised), and the shapes of
    the weights and of the output the variants built on them return (None: the product with V
    raises)."""

    scores: Prediction
    shapes: dict[str, tuple[int, ...] | None]


def _raw_scores(p: Probe, product: Option) -> Raw:
    scores = _attempt(product.apply, p.Q, p.K)
    if isinstance(scores, BaseException):
        return Raw(scores, {})
    output = _dot_shape(scores.shape, p.V.shape) if product is DOT_BOTH else _matmul_shape(scores.shape, p.V.shape)
    return Raw(scores, {"weights": scores.shape, "output": output})


# What the catalogue predicts for a probe depends on the probe alone, and a batch grades every
# submission on the same probe objects: the raw scores, the predictions and what comparing with
# them needs are computed once per run and shared (keyed by the probe, see OwnerMemo). Only
# predictions with the catalogue's own scale options are shared (fitted scales belong to one
# submission).
_STACKS: OwnerMemo[Stack] = OwnerMemo(50_000)
_RAW: OwnerMemo[Raw] = OwnerMemo()


@dataclass
class Evidence:
    """The probes, what the submission returned for each, and the variants' verdicts on them."""

    probes: dict[str, Probe]
    observed: dict[str, Observation]  # the first call of each probe
    tolerances: dict[str, Tolerance]  # per probe: large-input probes are judged more loosely
    scale_options: list[Option] = field(default_factory=lambda: list(SCALE.options))
    _cache: dict[tuple[object, ...], Any] = field(default_factory=dict)
    _keep: list[Variant] = field(default_factory=list)  # fitted variants, alive for the search
    # Per probe and choice of the other axes: the verdict of every scale option, as a list
    # (indexed thousands of times per search: a list is quicker to index than an array).
    _verdict_lists: dict[tuple[str, tuple[Option, ...], int], list[bool]] = field(default_factory=dict)
    _scale_index: dict[int, tuple[int, int]] = field(default_factory=dict)  # id(scale option) -> its stack and index there

    # -- predictions ---------------------------------------------------------------------------

    def predict(self, variant: Variant, name: str) -> Prediction:
        """What ``variant`` returns for probe ``name``: an array, or the exception it raises."""
        p = self.probes[name]
        with np.errstate(all="ignore"):
            return _attempt(variant, p.Q, p.K, p.V)

    def returned(self, name: str) -> np.ndarray | None:
        """The numeric array the submission returned for a probe, or None."""
        obs = self.observed.get(name)
        if obs is None or obs.status != "returned" or obs.value is None or obs.value.array is None:
            return None
        array = obs.value.array
        return array if array.dtype.kind in "fiu" else None

    def _as_float(self, name: str) -> np.ndarray | None:
        key = (name, "float64")
        if key not in self._cache:
            actual = self.returned(name)
            self._cache[key] = None if actual is None else actual.astype(np.float64)
        return self._cache[key]

    def _finite(self, name: str, actual: np.ndarray) -> bool:
        key = (name, "finite")
        if key not in self._cache:
            self._cache[key] = bool(np.isfinite(actual).all())
        return bool(self._cache[key])

    def _raw(self, name: str, product: Option) -> Raw:
        p = self.probes[name]
        return _RAW.get(p, (product,), lambda: _raw_scores(p, product))

    # -- comparing -----------------------------------------------------------------------------

    def matches(self, variant: Variant, name: str) -> bool:
        part, index = self._slot(variant.scale)
        return self._verdict_list(variant, name, part)[index]

    def _verdict_list(self, variant: Variant, name: str, part: int) -> list[bool]:
        key = (name, variant.others, part)
        verdicts = self._verdict_lists.get(key)
        if verdicts is None:
            with np.errstate(all="ignore"):
                verdicts = self._verdict_lists[key] = self._verdicts(name, variant, part).tolist()
        return verdicts

    def _slot(self, scale: Option) -> tuple[int, int]:
        """Which stack holds a scale option's predictions (0: the catalogue's scales, 1: those
        fitted to this submission) and its index there."""
        slot = self._scale_index.get(id(scale))
        if slot is None:
            index = next(i for i, o in enumerate(self.scale_options) if o is scale)
            fixed = len(SCALE.options)
            slot = self._scale_index[id(scale)] = (0, index) if index < fixed else (1, index - fixed)
        return slot

    def _verdicts(self, name: str, variant: Variant, part: int) -> np.ndarray:
        """For every scale option of one stack (``part``): does the variant with the other
        options of ``variant`` reproduce the probe?"""
        choice = variant.choice
        fixed = len(SCALE.options)
        count = fixed if part == 0 else len(self.scale_options) - fixed
        p = self.probes[name]
        obs = self.observed[name]
        raw = self._raw(name, choice[POSITION_PRODUCT])
        if isinstance(raw.scores, BaseException):
            return np.full(count, obs.status == "raised")
        shape = raw.shapes[setting(choice, "output")]
        large = p.magnitude > 1.0
        overflow = obs.status == "raised" and large and obs.error is not None and obs.error.type in OVERFLOW_ERRORS
        if shape is None:  # the product with V raises
            return np.full(count, obs.status == "raised")
        actual = self._as_float(name)
        if obs.status == "raised" and not overflow:
            # Only a variant that raises too (a size or a softmax axis out of range) reproduces it.
            return self._raises(name, raw.scores.ndim, setting(choice, "softmax"), part)
        if not overflow and (actual is None or actual.shape != shape):
            return np.full(count, False)  # it returned no array (or another shape) where the variant returns
        stack = self._predicted(name, raw.scores, variant, part)
        if overflow:
            # math.exp raises where np.exp gives inf: the same overflow, in pure Python.
            return ~stack.all_finite & ~stack.raises
        assert actual is not None
        if stack.raises.all():
            return np.full(count, False)
        return stack.agrees(actual, self._finite(name, actual), self.tolerances[name], loose=large) & ~stack.raises

    def _raises(self, name: str, ndim: int, norm: Any, part: int) -> np.ndarray:
        """Per scale option of one stack: does the variant raise on this probe? Where a softmax
        axis is out of range every scale does, otherwise those whose size is (no replay needed)."""
        if isinstance(norm, ByRank) and not norm.has(ndim):
            key: tuple[object, ...] = (name, "raises-all", part)
            if key not in self._cache:
                self._cache[key] = np.full(len(self._scales(part)), True)
            return self._cache[key]
        key = (name, "raises", part)
        if key not in self._cache:
            p = self.probes[name]
            self._cache[key] = np.array([math.isnan(_factor(o, p)) for o in self._scales(part)], dtype=bool)
        return self._cache[key]

    def _scales(self, part: int) -> Sequence[Option]:
        fixed = len(SCALE.options)
        return self.scale_options[:fixed] if part == 0 else self.scale_options[fixed:]

    def _predicted(self, name: str, raw: np.ndarray, variant: Variant, part: int) -> Stack:
        """The variants' outputs for every scale option of one stack: the catalogue's own scales
        (shared by the run), or the scales fitted to this submission (made only when a fitted
        variant asks: most choices of the other axes never are). Each prediction of a stack is
        computed on its own, whatever else the stack holds."""
        p = self.probes[name]
        choice = variant.choice
        if part == 0:
            return _STACKS.get(p, variant.others, lambda: _stack(p, raw, choice, SCALE.options))
        return _stack(p, raw, choice, self.scale_options[len(SCALE.options):])

    def search(self, variants: Iterable[Variant], names: list[str], known: list[str] = ()) -> Variant | None:  # type: ignore[assignment]
        """The first (fewest mistakes) variant that reproduces every named probe. ``known``:
        probes already compared (cached), checked first as they reject most cheaply."""
        ordered = list(known) + sorted((n for n in names if n not in known), key=lambda n: discrimination(self.probes[n]))
        # matches(), unrolled: this loop runs thousands of times per submission.
        lists, slot_of, verdict_list = self._verdict_lists, self._slot, self._verdict_list
        for variant in variants:
            part, index = slot_of(variant.scale)
            others = variant.others
            for n in ordered:
                verdicts = lists.get((n, others, part)) or verdict_list(variant, n, part)
                if not verdicts[index]:
                    break
            else:
                return variant
        return None

    def variants(self) -> Catalogue:
        """The fixed catalogue plus, for this submission, variants with fitted scale factors."""
        extra = fitted_options(self)
        if not extra:
            return all_variants()
        self.scale_options = list(SCALE.options) + extra
        self._cache.clear()
        self._verdict_lists.clear()
        self._scale_index.clear()
        # A fitted scale is one more mistake: each option must combine with as many as the result has.
        base = [v for count in range(3) for v in tier(count) if v.scale is SCALE.default and all(o.combines > count for o in v.deviations)]
        fitted = [with_scale(v, option) for option in extra for v in base]
        self._keep.extend(fitted)
        return Catalogue(fitted)


def _factor(option: Option, p: Probe) -> float:
    """The scale an option gives on a probe; NaN where reading its size raises (Q.shape[2] of a
    single sequence)."""
    try:
        return float(option.apply(p.Q, p.K, p.V))
    except (IndexError, ValueError, ZeroDivisionError):
        return np.nan


def _stack(p: Probe, raw: np.ndarray, choice: tuple[Option, ...], scales: Sequence[Option]) -> Stack:
    factors = np.array([_factor(o, p) for o in scales])
    raises = np.isnan(factors)
    try:
        return Stack(replay_stack(raw, factors, p.V, choice), raises)
    except ValueError:  # a softmax axis this rank does not have: every scale raises
        return Stack(np.full((len(scales), 1), np.nan), np.full(len(scales), True))


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


def _dot_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape of np.dot(a, b) for arrays of at least two dimensions, or None if it raises."""
    if a[-1] != b[-2]:
        return None
    return (*a[:-1], *b[:-2], b[-1])


def agrees_stack(actual: np.ndarray, predicted: np.ndarray, tolerance: Tolerance, loose: bool = False) -> np.ndarray:
    """For each array of the stack ``predicted``: same non-finite places as ``actual`` and the
    rest within tolerance (|actual - predicted| <= atol + rtol * |predicted|).

    ``loose`` (large inputs): overflow depends on the precision and the order of operations, so
    any non-finite value on one side only needs some non-finite value on the other.
    """
    axes = tuple(range(1, predicted.ndim))
    a = actual[None]
    fa, fp = np.isfinite(a), np.isfinite(predicted)
    both = fa & fp
    within = np.where(both, np.abs(a - predicted) <= tolerance.atol + tolerance.rtol * np.abs(predicted), True).all(axis=axes)
    if loose:
        p_bad = ~fp.all(axis=axes)
        a_bad = not bool(fa.all())
        return np.where(p_bad | a_bad, p_bad & a_bad, within)
    same_places = (fa == fp).all(axis=axes)
    same_kind = np.where(~fa & ~fp, np.isnan(a) == np.isnan(predicted), True).all(axis=axes)
    return same_places & same_kind & within


def discrimination(probe: Probe) -> tuple[int, ...]:
    """Sort key: the probes that tell the most mistakes apart first. All sizes different (equal
    sizes hide which one a scale used); the weights themselves (V = identity) before an output
    (a real V, which alone shows returns-weights, follows right after); a batch before a single
    sequence of the same kind (it shows the transpose too); large and fresh probes last."""
    sizes = {probe.Q.shape[-2], probe.K.shape[-2], probe.Q.shape[-1], probe.V.shape[-1]}
    return (int(probe.magnitude > 1.0), int(probe.fresh), -len(sizes), int(probe.kind != "identity"), -probe.Q.ndim)


# ---------------------------------------------------------------------------------------------
# Fitted scales


@dataclass(frozen=True)
class ScalePoint:
    """The scale a submission applied on one probe, with the sizes of that probe."""

    probe: str
    sizes: dict[str, int]
    scale: float
    r2: float


def scale_points(ev: Evidence, linear: bool = False, batched: bool = False) -> list[ScalePoint]:
    """The effective scale fitted on each single-sequence (and with ``batched``, each batched)
    weights probe where one scale explains the weights: a softmax of scaled scores, or with
    ``linear`` the scaled scores themselves."""
    points = []
    for name, probe in ev.probes.items():
        if probe.kind != "identity" or (probe.batched and not batched) or probe.magnitude > 1.0 or name not in ev.observed:
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
        # Code that raises on a single sequence (written for batches only) is fitted on its
        # batches: the scale is all the weights show there too.
        points = scale_points(ev, linear) or scale_points(ev, linear, batched=True)
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
        if not candidates:
            everywhere = scale_points(ev, linear, batched=True)
            table = _table(everywhere)
            if table is not None:
                stored = {p.sizes["d_k"] for p in everywhere if not ev.probes[p.probe].fresh}
                candidates.append(fitted_scale_table(table, stored))
        for option in candidates:
            if not _given_by_fixed(option, ev):
                options.append(option)
    return options


def _table(points: list[ScalePoint]) -> dict[int, float] | None:
    """The fitted scale at each d_k, if the fits at the same d_k agree: a function of d_k."""
    table: dict[int, float] = {}
    for point in points:
        dk = point.sizes["d_k"]
        if dk in table and abs(table[dk] / point.scale - 1.0) > LAW_ERROR:
            return None
        table.setdefault(dk, point.scale)
    return table if len(table) >= 2 else None


def _given_by_fixed(option: Option, ev: Evidence) -> bool:
    """A fitted option that gives the same scale as a fixed one on every probe adds nothing."""
    return any(all(_same(option, fixed, probe) for probe in ev.probes.values()) for fixed in SCALE.options)


def _same(a: Option, b: Option, probe: Probe) -> bool:
    x, y = _factor(a, probe), _factor(b, probe)
    return abs(x - y) <= 0.005 * abs(y)
