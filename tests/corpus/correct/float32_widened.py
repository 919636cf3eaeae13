# Single precision kept through the softmax, widened at the end: passes, with the warning.
import numpy as np


def attention(Q, K, V):
    q = Q.astype(np.float32)
    k = K.astype(np.float32)
    s = q @ np.swapaxes(k, -1, -2) / np.float32(np.sqrt(Q.shape[-1]))
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w.astype(np.float64) @ V
