# Bug: a constant 1e-3 added to the output: small, but of one sign everywhere, so no rounding
# explains it (a values mismatch, not reduced precision).
import numpy as np


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ V + 1e-3
