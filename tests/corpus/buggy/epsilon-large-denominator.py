# Bug: an epsilon of 1e-3 in the softmax denominator moves every weight of a row by the same
# factor, beyond the tolerance: a values mismatch, not reduced precision (float64 throughout).
import numpy as np


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / (e.sum(axis=-1, keepdims=True) + 1e-3)) @ V
