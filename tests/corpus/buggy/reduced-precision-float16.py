# Bug: every step in half precision, widened to float64 at the end; float16 rounds to ~1e-3,
# beyond the tolerance.
import numpy as np


def attention(Q, K, V):
    q, k, v = (x.astype(np.float16) for x in (Q, K, V))
    s = q @ np.swapaxes(k, -1, -2) / np.float16(np.sqrt(Q.shape[-1]))
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return (w @ v).astype(np.float64)
