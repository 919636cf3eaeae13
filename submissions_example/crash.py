"""Bug: multiplies Q by K without transposing, which raises for any T_k != d_k."""

import numpy as np


def attention(Q, K, V):
    scores = Q @ K / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ V
