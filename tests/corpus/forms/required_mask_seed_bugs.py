"""The seed's two bugs with a required mask parameter."""

import numpy as np


def attention(Q, K, V, mask):
    scores = Q @ K.T / Q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ V
