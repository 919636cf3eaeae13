"""Masks the weights after the softmax: masked keys get 0, but rows no longer sum to 1."""

import numpy as np


def attention(Q, K, V, mask=None):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    if mask is not None:
        weights = weights * mask
    return weights @ V
