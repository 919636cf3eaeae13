"""The reference attention, in float64, and the softmax it uses.

Two implementations of the same formula live here:

* :func:`attention` is vectorised numpy, used at grading time to predict what a submission (or a
  known mistake, see ``grader.diagnosis.catalogue``) returns on fresh inputs;
* :func:`exact_attention` is pure Python with ``math.fsum``. It is used to write ``reference/``:
  correctly rounded sums do not depend on the BLAS, the CPU or the summation order, so the stored
  files come out byte-identical on every run and every machine with the same libm.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def softmax(x: Array, axis: int = -1) -> Array:
    """Numerically stable softmax: subtracting the row maximum changes nothing mathematically and
    keeps exp() from overflowing on large scores."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def attention_weights(Q: Array, K: Array) -> Array:
    d_k = Q.shape[-1]
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / math.sqrt(d_k)
    return softmax(scores, axis=-1)


def attention(Q: Array, K: Array, V: Array) -> Array:
    """softmax(Q K^T / sqrt(d_k)) V over the last two axes; any leading axes are batch axes."""
    return np.matmul(attention_weights(Q, K), V)


def _exact_rows(Q: list[list[float]], K: list[list[float]], keep: list[list[bool]] | None = None) -> list[list[float]]:
    d_k = len(Q[0])
    root = math.sqrt(d_k)
    weights: list[list[float]] = []
    for i, q in enumerate(Q):
        scores = [math.fsum(a * b for a, b in zip(q, k)) / root for k in K]
        # A masked key is a score of -inf: it takes no part in the maximum and gets
        # exactly zero weight. Without a mask every key is kept and this is the plain softmax.
        kept = keep[i] if keep is not None else [True] * len(scores)
        if not any(kept):
            weights.append([0.0] * len(scores))  # a fully masked row: defined as zeros (grader/masks.py)
            continue
        top = max(s for s, k in zip(scores, kept) if k)
        e = [math.exp(s - top) if k else 0.0 for s, k in zip(scores, kept)]
        total = math.fsum(e)
        weights.append([x / total for x in e])
    return weights


def exact_attention(Q: Array, K: Array, V: Array, mask: NDArray[np.bool_] | None = None) -> tuple[Array, Array]:
    """(weights, output) computed element by element with correctly rounded sums; ``mask``
    (True = keep, shape (..., T_q, T_k)) sets masked scores to -inf before the softmax."""
    batch_shape = Q.shape[:-2]
    tq, tk, dv = Q.shape[-2], K.shape[-2], V.shape[-1]
    weights = np.empty(batch_shape + (tq, tk), dtype=np.float64)
    output = np.empty(batch_shape + (tq, dv), dtype=np.float64)
    for index in np.ndindex(*batch_shape):
        w = _exact_rows(Q[index].tolist(), K[index].tolist(), None if mask is None else mask[index].tolist())
        v = V[index].tolist()
        weights[index] = w
        output[index] = [[math.fsum(w_row[j] * v[j][c] for j in range(tk)) for c in range(dv)] for w_row in w]
    return weights, output
