# Bug: the product Q K^T in float16, widened to float64 for the rest: the result is float64 off any
# narrow grid, but its scores carry float16 rounding.
import numpy as np


def attention(Q, K, V):
    q = Q.astype(np.float16)
    k = K.astype(np.float16)
    s = (q @ np.swapaxes(k, -1, -2)).astype(np.float64) / np.sqrt(Q.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V
