"""Fitting the effective scale factor from a weight matrix.

Within one row of softmax(s * S), log w_j - log w_k = s * (S_j - S_k) for raw scores S = Q K^T.
Centring the log-weights and the raw scores per row turns that into a line through the origin,
whose least-squares slope is the effective scale s. R^2 says how well a single scale explains the
weights: near 1 means "a softmax of scaled dot products, with this scale".

Centring per column as well (log w = s * S + a_i + b_j) gives the same slope for a softmax that
normalises over the queries or over the whole matrix, so the scale is found even when the axis is
wrong too. Across cases with different sizes, the fitted scales are fitted in turn by a power law
c * size^p: a constant (p = 0), 1/sqrt(d_k) (p = -1/2), d_k^-1/4, ...
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np



@dataclass(frozen=True)
class ScaleFit:
    """The single factor that best explains a probe's weights, and how well it does."""

    scale: float
    r2: float
    points: int

    @property
    def reliable(self) -> bool:
        return self.points >= 4 and self.r2 > 0.999 and np.isfinite(self.scale)


def _slope(y: np.ndarray, x: np.ndarray) -> ScaleFit | None:
    denominator = float(np.sum(x * x))
    if denominator == 0.0 or not np.isfinite(denominator):
        return None
    s = float(np.sum(y * x) / denominator)
    residual = float(np.sum((y - s * x) ** 2))
    total = float(np.sum(y * y))
    r2 = 1.0 - residual / total if total > 0 else (1.0 if residual == 0 else 0.0)
    return ScaleFit(scale=s, r2=r2, points=int(y.size))


def fit_scale(Q: np.ndarray, K: np.ndarray, weights: np.ndarray) -> ScaleFit | None:
    """The scale s that best explains ``weights`` as softmax(s * Q K^T), or None.

    Fitted per row, and per row and column of each score matrix; the better of the two is kept.
    """
    if weights.shape != Q.shape[:-1] + (K.shape[-2],) or K.shape[-2] < 2:
        return None
    raw = np.matmul(Q, np.swapaxes(K, -1, -2))
    with np.errstate(all="ignore"):
        w = np.asarray(weights, dtype=np.float64)
        usable = np.isfinite(w) & (w > 1e-250)
        if not usable.all():
            # Only whole rows can be centred: keep the rows with every weight usable.
            rows = np.all(usable, axis=-1)
            if not rows.any():
                return None
            logs, scores = np.log(w[rows]), raw[rows]
            return _slope(logs - logs.mean(axis=-1, keepdims=True), scores - scores.mean(axis=-1, keepdims=True))
        logs = np.log(w)
        row = _slope(logs - logs.mean(axis=-1, keepdims=True), raw - raw.mean(axis=-1, keepdims=True))
        if Q.shape[-2] < 2 or (row is not None and row.r2 > 0.999999):
            return row
        both = _slope(_centre_both(logs), _centre_both(raw))
    if row is None or (both is not None and both.r2 > row.r2):
        return both
    return row


def _centre_both(x: np.ndarray) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    return x - x.mean(axis=-2, keepdims=True)


def fit_linear(Q: np.ndarray, K: np.ndarray, weights: np.ndarray) -> ScaleFit | None:
    """The s that best explains ``weights`` as s * Q K^T itself (no softmax), or None."""
    if weights.shape != Q.shape[:-1] + (K.shape[-2],):
        return None
    with np.errstate(all="ignore"):
        w = np.asarray(weights, dtype=np.float64)
        if not np.all(np.isfinite(w)):
            return None
        return _slope(w, np.matmul(Q, np.swapaxes(K, -1, -2)))


@dataclass(frozen=True)
class PowerLaw:
    """scale = c * size^p, with the largest relative error of the law over the points."""

    c: float
    p: float
    worst: float


def fit_power(points: list[tuple[float, float]]) -> PowerLaw | None:
    """Fit scale = c * size^p through (size, scale) points with at least two distinct sizes."""
    sizes = np.array([x for x, _ in points], dtype=np.float64)
    scales = np.array([y for _, y in points], dtype=np.float64)
    if len(set(sizes.tolist())) < 2 or np.any(scales <= 0) or np.any(sizes <= 0):
        return None
    lx, ly = np.log(sizes), np.log(scales)
    p, log_c = np.polyfit(lx, ly, 1)
    predicted = np.exp(log_c + p * lx)
    worst = float(np.max(np.abs(predicted - scales) / scales))
    return PowerLaw(c=float(np.exp(log_c)), p=float(p), worst=worst)


@dataclass(frozen=True)
class RowShape:
    """How peaked the rows are: mean entropy (nats) and mean largest weight per row."""

    entropy: float
    max_weight: float


def row_shape(weights: np.ndarray) -> RowShape | None:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim < 1 or w.shape[-1] == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        return None
    with np.errstate(all="ignore"):
        entropy = -np.sum(np.where(w > 0, w * np.log(w), 0.0), axis=-1)
    return RowShape(entropy=float(np.mean(entropy)), max_weight=float(np.mean(np.max(w, axis=-1))))
