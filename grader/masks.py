"""Attention masks: building them and the masked reference (the masked probes are built in
``grader.probes``).

A mask is boolean, True = keep, with the full shape of the scores (..., T_q, T_k), and is passed
to the submission as its fourth argument (by keyword when a parameter is called ``mask``,
``attn_mask`` or ``attention_mask``). The reference sets masked scores to -inf before the softmax,
so masked keys get exactly zero weight and each row still sums to 1.

A row with every key masked has no defined attention (a softmax over nothing): implementations
legitimately return NaN, zeros or a uniform row there. Suites cannot ask for such rows (see
``grader.suite._mask``); the reference returns zeros for them so that it is total.
"""

from __future__ import annotations

import numpy as np

from grader.attention import Array, softmax
from grader.suite import Case, MaskSpec, Shape

KEEP_ALL = "keep-all"  # the probe kind with a mask of all True


def build_mask(spec: MaskSpec, shape: Shape) -> np.ndarray:
    """The boolean mask of ``spec`` for a case of ``shape``: shape.batch + (T_q, T_k)."""
    if spec.kind == "causal":  # query i keeps keys 0..i
        return np.broadcast_to(np.tril(np.ones((shape.tq, shape.tk), dtype=bool)), shape.batch + (shape.tq, shape.tk)).copy()
    keep = np.arange(shape.tk)[None, :] < np.asarray(spec.lengths)[:, None]  # (B, T_k), or (1, T_k) unbatched
    if shape.batch:  # batch element b is the first axis; later axes (heads) share its lengths
        keep = keep.reshape((len(spec.lengths),) + (1,) * (len(shape.batch) - 1) + (1, shape.tk))
    return np.broadcast_to(keep, shape.batch + (shape.tq, shape.tk)).copy()


def case_mask(case: Case) -> np.ndarray | None:
    return None if case.mask is None else build_mask(case.mask, case.shape)


def masked_weights(Q: Array, K: Array, mask: np.ndarray) -> Array:
    """softmax over the kept keys of Q K^T / sqrt(d_k); masked keys get 0; a fully masked row is 0."""
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
    with np.errstate(invalid="ignore"):
        weights = softmax(np.where(mask, scores, -np.inf), axis=-1)
    return np.where(np.any(mask, axis=-1, keepdims=True), weights, 0.0)


def masked_attention(Q: Array, K: Array, V: Array, mask: np.ndarray) -> Array:
    return np.matmul(masked_weights(Q, K, mask), V)

