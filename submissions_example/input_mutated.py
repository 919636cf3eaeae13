"""Bug: scales the caller's queries in place. The output is right, but Q is changed afterwards."""

import numpy as np


def attention(Q, K, V):
    Q *= 1.0 / np.sqrt(Q.shape[-1])
    scores = Q @ np.swapaxes(K, -1, -2)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ V
