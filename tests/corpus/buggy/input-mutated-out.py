# Bug: np.multiply(..., out=K) writes the scaled keys into the caller's K.
import numpy as np


def attention(Q, K, V):
    np.multiply(K, 1.0 / np.sqrt(K.shape[-1]), out=K)
    scores = Q @ np.swapaxes(K, -1, -2)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ V
