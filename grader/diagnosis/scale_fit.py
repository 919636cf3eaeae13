"""Fitting the effective scale factor from a weight matrix.

Within one row of softmax(s * S), log w_j - log w_k = s * (S_j - S_k) for raw scores S = Q K^T.
Centring the log-weights and the raw scores per row turns that into a line through the origin,
whose least-squares slope is the effective scale s. R^2 says how well a single scale explains the
weights: near 1 means "a softmax of scaled dot products, with this scale".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScaleFit:
    scale: float
    r2: float
    points: int

    @property
    def reliable(self) -> bool:
        return self.points >= 4 and self.r2 > 0.999 and np.isfinite(self.scale)


def fit_scale(Q: np.ndarray, K: np.ndarray, weights: np.ndarray) -> ScaleFit | None:
    """The scale s that best explains ``weights`` as softmax(s * Q K^T) row by row, or None."""
    if weights.shape != Q.shape[:-1] + (K.shape[-2],):
        return None
    raw = np.matmul(Q, np.swapaxes(K, -1, -2)).reshape(-1, K.shape[-2])
    w = np.asarray(weights, dtype=np.float64).reshape(-1, K.shape[-2])
    with np.errstate(all="ignore"):
        usable = np.all(np.isfinite(w) & (w > 1e-250), axis=1)
        if usable.sum() == 0 or w.shape[1] < 2:
            return None
        logs = np.log(w[usable])
        scores = raw[usable]
        lc = logs - logs.mean(axis=1, keepdims=True)
        sc = scores - scores.mean(axis=1, keepdims=True)
        denominator = float(np.sum(sc * sc))
        if denominator == 0.0:
            return None
        s = float(np.sum(lc * sc) / denominator)
        residual = float(np.sum((lc - s * sc) ** 2))
        total = float(np.sum(lc * lc))
    r2 = 1.0 - residual / total if total > 0 else 0.0
    return ScaleFit(scale=s, r2=r2, points=int(lc.size))


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
