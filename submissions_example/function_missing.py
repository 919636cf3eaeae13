"""Bug: the function is called `self_attention`, not `attention`."""

import numpy as np


def self_attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ V
