"""Extra parameters with defaults (dropout, a mask, a flag) are left alone."""

import numpy as np


def attention(Q, K, V, mask=None, dropout=0.0, *, return_weights=False):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    if dropout:
        raise ValueError("no dropout while grading")
    return (weights @ V, weights) if return_weights else weights @ V
