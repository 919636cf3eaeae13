"""The seed's two bugs, with a mask handled correctly."""

import numpy as np


def attention(Q, K, V, mask=None):
    scores = Q @ K.T / Q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ V
