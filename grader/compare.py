"""Comparing a submission's array with the expected one, with numbers for the message.

Everything is computed in float64. An element matches when
``|actual - expected| <= atol + rtol * |expected|`` (numpy's ``isclose``); the relative
difference reported is ``|actual - expected| / |expected|`` over the mismatched elements whose
expected value is not zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grader.suite import Tolerance


@dataclass(frozen=True)
class Mismatch:
    """How an array differs from the expected one: counts, the largest differences, the worst element."""

    mismatched: int
    total: int
    max_abs: float
    max_rel: float
    worst_index: tuple[int, ...]
    actual: float
    expected: float
    nonfinite: int = 0

    @property
    def ok(self) -> bool:
        return self.mismatched == 0

    @property
    def percent(self) -> float:
        return 100.0 * self.mismatched / self.total if self.total else 0.0

    def describe(self) -> str:
        if self.ok:
            return f"all {self.total} elements match"
        text = (
            f"{self.mismatched} / {self.total} elements differ ({self.percent:.1f} %), "
            f"max abs diff {self.max_abs:.3g}, max rel diff {self.max_rel:.3g}; "
            f"worst at {list(self.worst_index)}: got {self.actual:.6g}, expected {self.expected:.6g}"
        )
        if self.nonfinite:
            text += f"; {self.nonfinite} non-finite values"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "mismatched": self.mismatched,
            "total": self.total,
            "max_abs_diff": _json_float(self.max_abs),
            "max_rel_diff": _json_float(self.max_rel),
            "worst_index": list(self.worst_index),
            "actual": _json_float(self.actual),
            "expected": _json_float(self.expected),
            "nonfinite": self.nonfinite,
        }


def _json_float(value: float) -> float | str:
    return value if np.isfinite(value) else str(value)


def compare(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> Mismatch:
    """Element-wise comparison of two arrays of the same shape."""
    a = np.asarray(actual)
    if a.dtype != np.float64:  # float64 is used as it is: the copy astype makes changes no value
        a = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if np.iscomplexobj(a) and not np.any(a.imag):
        a = a.real
    # A complex result left (the checks never compare one: checks.base.returned_array) is judged
    # by its distance in the plane: an imaginary part is a difference, never hidden in a modulus.
    with np.errstate(all="ignore"):
        diff = np.abs(a - e)
        good = diff <= tolerance.atol + tolerance.rtol * np.abs(e)  # NaN compares false: mismatched
        if good.all():  # the usual case, answered without the counts a mismatch needs
            return Mismatch(0, int(e.size), float(np.max(diff, initial=0.0)), 0.0, (), 0.0, 0.0, 0)
        bad = ~good
        nonfinite = int(np.count_nonzero(~np.isfinite(a)))
        mismatched = int(np.count_nonzero(bad))
        rel = np.where(bad & (e != 0), diff / np.abs(e), 0.0)
        if np.isfinite(diff).all():
            # The usual mismatch: with no NaN or inf to rank, the largest difference over the
            # mismatched elements (all >= 0, the others -1 here) is both the worst and max_abs,
            # and rel holds no NaN.
            masked = np.where(bad, diff, -1.0)
            flat = int(np.argmax(masked))
            max_abs, max_rel = float(masked.flat[flat]), float(np.max(rel))
        else:
            masked = np.where(bad, np.nan_to_num(diff, nan=np.inf), -1.0)
            flat = int(np.argmax(masked))
            max_abs = float(np.max(np.where(bad, diff, 0.0))) if not np.isnan(diff[bad]).any() else float("nan")
            max_rel = float(np.nanmax(rel)) if np.any(~np.isnan(rel)) else float("nan")  # NaN-only rows: no warning
        worst = tuple(int(i) for i in np.unravel_index(flat, e.shape))
        return Mismatch(
            mismatched=mismatched,
            total=int(e.size),
            max_abs=max_abs,
            max_rel=max_rel,
            worst_index=worst,
            actual=float(np.real(a[worst])),
            expected=float(e[worst]),
            nonfinite=nonfinite,
        )


def close(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> bool:
    """Same shape and every element within tolerance (a cheaper yes/no for the diagnosis search)."""
    if actual.shape != expected.shape:
        return False
    with np.errstate(all="ignore"):
        return bool(np.all(np.abs(actual.astype(np.float64) - expected) <= tolerance.atol + tolerance.rtol * np.abs(expected)))
