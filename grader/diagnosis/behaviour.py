"""Mistakes the catalogue cannot replay, seen directly in the observations.

* input-mutated: the worker sends back Q, K and V as they were after the call;
* nondeterministic: some probes are called twice on fresh copies of the same inputs;
* reduced-precision (a warning): the result is narrower than float64, or differs from the float64
  reference by more than float64 rounding while staying within the tolerance;
* reduced-precision (the failing mistake): differences beyond the tolerance that are all the size
  and the shape of half-precision rounding, with the dtype or the float16 or bfloat16 grid as
  evidence.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from grader.checks.memo import OwnerMemo
from grader.diagnosis.catalogue import REFERENCE
from grader.diagnosis.model import Diagnosis
from grader.observation import Observation
from grader.probes import Probe
from grader.suite import Tolerance

# float64 arithmetic on these sizes differs from the exact result by ~1e-15; single precision by
# ~1e-7. Anything between the two within the tolerance is single-precision rounding.
DOUBLE_ROUNDING = 1e-10
# Beyond the tolerance, rounding explains a difference of at most this many units of the narrow
# type's epsilon, times the largest reference value of the row. Attention done wholly in float16
# (inputs, scores, softmax and output) stays within 2 on the suite's sizes; a constant offset of
# 0.01 is ~90 units, noise of 1e-3 ~20, a scale of 1/sqrt(d_k + 0.1) ~14.
ROUNDING_UNITS = 8.0
HALF = np.dtype(np.float16)
BFLOAT16_EPS = 2.0**-7  # 8 bits of significand (7 stored): the step above 1


def input_mutated(probes: dict[str, Probe], observations: dict[tuple[str, int], Observation], failed: tuple[str, ...]) -> Diagnosis | None:
    order = {name: i for i, name in enumerate(probes)}
    for (name, call), obs in sorted(observations.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0][1])):
        probe = probes.get(name)
        if probe is None or not obs.inputs_after:
            continue
        for label, sent in (("Q", probe.Q), ("K", probe.K), ("V", probe.V)):
            after = obs.inputs_after.get(label)
            if after is None:
                continue
            changed = _change(sent, after)
            if changed is not None:
                message, evidence = changed
                evidence.update(probe=name, array=label, call=call)
                return Diagnosis.of("input-mutated", f"{label} changed in place by the call on {name}: {message}", evidence, failed)
    return None


def _change(sent: np.ndarray, after: np.ndarray) -> tuple[str, dict[str, Any]] | None:
    if after.shape != sent.shape:
        return f"its shape became {tuple(after.shape)} (was {tuple(sent.shape)})", {"shape": list(after.shape), "sent_shape": list(sent.shape)}
    with np.errstate(all="ignore"):
        a = after if after.dtype == np.float64 else after.astype(np.float64)  # read only: no copy needed
        same = a == sent
        if same.all():  # the usual case: nothing changed, and no NaN to pair up
            return None
        differ = ~(same | (np.isnan(a) & np.isnan(sent)))
        count = int(np.count_nonzero(differ))
        if count == 0:
            return None
        biggest = float(np.nanmax(np.abs(a - sent)[differ])) if np.any(np.isfinite(a[differ])) else float("inf")
        message = f"{count} of {sent.size} elements differ afterwards (largest change {biggest:.3g})"
        evidence: dict[str, Any] = {"changed": count, "total": int(sent.size), "max_change": biggest}
        nonzero = sent != 0
        if not np.any(a):
            message += "; every element was set to 0"
        elif np.any(nonzero):
            ratios = a[nonzero] / sent[nonzero]
            if np.all(np.isfinite(ratios)) and np.ptp(ratios) <= 1e-9 * max(1.0, abs(float(ratios[0]))):
                factor = float(ratios[0])
                evidence["factor"] = factor
                message += f"; every element was multiplied by {factor:.6g}"
    return message, evidence


def nondeterministic(probes: dict[str, Probe], observations: dict[tuple[str, int], Observation], tolerance: Tolerance, failed: tuple[str, ...]) -> Diagnosis | None:
    for (name, call), second in sorted(observations.items()):
        if call == 0 or name not in probes:
            continue
        first = observations.get((name, 0))
        if first is None:
            continue
        shape = f"Q{tuple(probes[name].Q.shape)}, K{tuple(probes[name].K.shape)}, V{tuple(probes[name].V.shape)}"
        if first.status != second.status:
            what = "raises" if first.status == "raised" else "returns"
            return Diagnosis.of("nondeterministic", f"on identical inputs ({name}, {shape}) call 1 {what} and call {call + 1} does not", {"probe": name}, failed)
        a, b = _array(first), _array(second)
        if a is None or b is None:
            continue
        if a.shape != b.shape:
            return Diagnosis.of("nondeterministic", f"on identical inputs ({name}) two calls return shapes {tuple(a.shape)} and {tuple(b.shape)}", {"probe": name}, failed)
        with np.errstate(all="ignore"):
            x, y = a.astype(np.float64), b.astype(np.float64)
            same = (np.abs(x - y) <= tolerance.atol + tolerance.rtol * np.abs(y)) | (np.isnan(x) & np.isnan(y)) | (x == y)
        if not np.all(same):
            count = int(np.count_nonzero(~same))
            diff = float(np.nanmax(np.abs(x - y)[~same])) if np.any(np.isfinite((x - y)[~same])) else float("nan")
            evidence = {"probe": name, "differing": count, "total": int(x.size), "max_abs_diff": diff}
            return Diagnosis.of("nondeterministic", f"two calls with identical inputs ({name}, {shape}) differ in {count} of {x.size} elements (max abs diff {diff:.3g})", evidence, failed)
    return None


def _array(obs: Observation) -> np.ndarray | None:
    if obs.status != "returned" or obs.value is None or obs.value.array is None or obs.value.array.dtype.kind not in "fiu":
        return None
    return obs.value.array


def reduced_precision(probes: dict[str, Probe], observed: dict[str, Observation], tolerance: Tolerance) -> Diagnosis | None:
    """A warning when the result carries less than double precision: a narrower dtype (said even
    beside other mistakes, as it explains part of any difference), or float64 values whose
    difference from the reference is single-precision rounding while everything is in tolerance."""
    narrow: set[str] = set()
    worst = 0.0
    within = True
    doubles: list[tuple[np.ndarray, np.ndarray]] = []
    with np.errstate(all="ignore"):  # once for the loop: entering it per probe costs as much as the sums
        for name, obs in observed.items():
            probe = probes[name]
            array = _array(obs)
            if array is None:
                continue
            if array.dtype.itemsize < 8 and array.dtype.kind == "f":
                narrow.add(str(array.dtype))
            expected = _reference(probe)
            if array.shape != expected.shape or probe.magnitude > 1.0:
                continue
            # Mixed with float64, any integer or float array is promoted exactly as astype would.
            diff = np.abs(array - expected)
            within = within and bool(np.all(diff <= _limit(probe, expected, tolerance)))
            worst = max(worst, _nanmax(diff))
            if array.dtype == np.float64:
                doubles.append((array, expected))  # judged below, only if the sizes call for it
    if narrow:
        kinds = ", ".join(sorted(narrow))
        how = "within the tolerance" if within else "beyond the tolerance in places"
        return Diagnosis.of("reduced-precision", f"returns {kinds} arrays; largest difference from the float64 reference {worst:.3g}, {how}", {"dtype": sorted(narrow), "max_abs_diff": worst})
    # Some float64 result must differ as float32 rounding does, not by a steady factor per row.
    if within and worst > DOUBLE_ROUNDING and any(_looks_rounded(a, e) for a, e in doubles):
        return Diagnosis.of("reduced-precision", f"returns float64, but differs from the float64 reference by up to {worst:.3g}: the size of single-precision rounding (within the tolerance)", {"dtype": ["float64"], "max_abs_diff": worst})
    return None


def rounding_beyond_tolerance(probes: dict[str, Probe], observed: dict[str, Observation], tolerances: dict[str, Tolerance], failed: tuple[str, ...]) -> Diagnosis | None:
    """reduced-precision as the failing mistake, when rounding to a narrow float is the only
    explanation of differences beyond the tolerance: every probe returns a float array of the
    reference's shape, finite where it is, within ROUNDING_UNITS of the narrow type's epsilon
    (relative to the row); some probe is beyond the tolerance; and the precision is evidenced by
    the dtype (float16, float32), by float32 or float64 values on the bfloat16 grid, by float64
    values on the float16 grid, or, for float64 values off
    any grid, by differences of both signs that vary within each row (no offset, no steady factor
    as an epsilon or a scale gives). Integer results are never rounding: that is truncation."""
    if not observed:
        return None
    narrow: set[str] = set()
    on_half_grid, balance, steady = True, [], False
    bfloat: set[str] = set()  # the dtypes of the results on the bfloat16 grid
    worst, worst_units, beyond = 0.0, 0.0, []
    with np.errstate(all="ignore"):
        for name, obs in observed.items():
            array, probe = _array(obs), probes[name]
            if array is None or array.dtype.kind != "f":
                return None  # raised, returned no array, or an integer one: no rounding explains it
            expected = _reference(probe)
            if array.shape != expected.shape:
                return None
            a = array.astype(np.float64)
            if not np.array_equal(np.isfinite(a), np.isfinite(expected)):
                return None
            tolerance = tolerances[name]
            diff = np.where(np.isfinite(expected), np.abs(a - expected), 0.0)
            if bool(np.all(diff <= tolerance.atol + tolerance.rtol * np.abs(np.where(np.isfinite(expected), expected, 0.0)))):
                continue
            beyond.append(name)
            eps = float(np.finfo(array.dtype if array.dtype.itemsize < 8 else HALF).eps)
            if array.dtype != HALF and on_grid(a, to_bfloat16):
                # float32 or float64 values that bfloat16 holds exactly: computed in bfloat16
                # (torch's .bfloat16(), jnp.bfloat16), then widened; its steps are 8 times float16's.
                bfloat.add(str(array.dtype))
                eps = BFLOAT16_EPS
            elif array.dtype.itemsize < 8:
                narrow.add(str(array.dtype))
            else:
                on_half_grid = on_half_grid and on_grid(a, lambda x: x.astype(HALF).astype(np.float64))
                signed = (a - expected)[diff > 0]
                balance.append(float(abs(signed.mean()) / np.abs(signed).mean()) if signed.size else 0.0)
                steady = steady or not _looks_rounded(a, expected)
            row = np.max(np.abs(np.where(np.isfinite(expected), expected, 0.0)), axis=-1, keepdims=True)
            units = float(np.max(diff / (eps * np.maximum(row, 1e-12))))
            if units > ROUNDING_UNITS:
                return None
            worst, worst_units = max(worst, float(diff.max())), max(worst_units, units)
    if not beyond:
        return None
    if bfloat and (narrow or balance):
        return None  # bfloat16's grid on some probes and not on others: not one precision
    if bfloat:
        widened = ", ".join(sorted(bfloat))
        kinds, how = "bfloat16", f"returns {widened} values that lie on the bfloat16 grid (computed in bfloat16, then widened)"
    elif narrow:
        kinds = ", ".join(sorted(narrow))
        how = f"returns {kinds} arrays"
    elif on_half_grid:
        kinds, how = "float16", "returns float64 values that lie on the float16 grid (computed in half precision, then widened)"
    elif float(np.median(balance)) < 0.5 and not steady:
        kinds, how = "float16", "returns float64, but differs from the reference by rounding-sized amounts of both signs that vary within each row, as half-precision steps leave them"
    else:
        return None
    message = (
        f"{how}; largest difference from the float64 reference {worst:.3g} ({worst_units:.2g} times {kinds}'s epsilon relative to the row), "
        f"beyond the tolerance on {len(beyond)} of {len(observed)} probes ({beyond[0]} first); no known mistake explains it, {kinds} rounding does"
    )
    evidence: dict[str, Any] = {"dtype": sorted(narrow or bfloat) or ["float64"], "precision": kinds, "max_abs_diff": worst, "epsilon_units": round(worst_units, 3), "probes_beyond_tolerance": len(beyond), "probe": beyond[0]}
    return Diagnosis.of("reduced-precision", message, evidence, failed, severity="error")


def to_bfloat16(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to bfloat16, as float64. NumPy has no bfloat16: it is float32's top 16
    bits, so round float32's bit pattern to nearest, ties to even, and clear the low 16 bits
    (inf and NaN are left to the caller, which compares finite values only)."""
    bits = values.astype(np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32).astype(np.float64)


def on_grid(values: np.ndarray, rounding: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Whether nearly all finite values are kept exactly by a rounding to a narrower float."""
    finite = values[np.isfinite(values)]
    return finite.size > 0 and bool(np.mean(rounding(finite) == finite) > 0.9)


def _looks_rounded(array: np.ndarray, expected: np.ndarray) -> bool:
    """float64 values off the reference as single precision leaves them: representable in float32,
    or off by differences that vary from element to element. An epsilon added to a denominator
    moves every weight of a row by nearly the same factor instead: no precision is lost."""
    finite = np.isfinite(array) & np.isfinite(expected) & (np.abs(expected) > 1e-12)
    if not finite.any():
        return False
    values = array[finite]
    if np.mean(values.astype(np.float32).astype(np.float64) == values) > 0.9:
        return True
    with np.errstate(all="ignore"):
        ratio = np.where(finite, array / np.where(finite, expected, 1.0) - 1.0, np.nan).reshape(-1, array.shape[-1])
        ratio = ratio[~np.isnan(ratio).all(axis=-1)]  # rows with a finite element (nan-functions warn on the others)
        spread = float(np.max(np.nanstd(ratio, axis=-1)))  # within a row: a steady factor has none
        size = float(np.nanmean(np.abs(ratio)))
    return spread > 0.1 * size and spread > 1e-12


# The reference's answer to a probe, and the tolerance around it, are the same for every
# submission of a run: computed once per probe.
_REFERENCE: OwnerMemo[np.ndarray] = OwnerMemo()


def _reference(probe: Probe) -> np.ndarray:
    return _REFERENCE.get(probe, ("reference",), lambda: REFERENCE(probe.Q, probe.K, probe.V))


def _limit(probe: Probe, expected: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    return _REFERENCE.get(probe, ("limit", tolerance.atol, tolerance.rtol), lambda: tolerance.atol + tolerance.rtol * np.abs(expected))


def _nanmax(values: np.ndarray) -> float:
    """np.nanmax(values, initial=0.0), without its copies when there is no NaN (the usual case)."""
    top = float(values.max(initial=0.0))
    return float(np.nanmax(values, initial=0.0)) if top != top else top
