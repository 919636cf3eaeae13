# Bug: the output buffer is an int64 array, so every assigned row of results loses its fraction.
import numpy as np


def _softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)


def _row(q, K, V):
    return _softmax(q @ np.swapaxes(K, -1, -2) / np.sqrt(q.shape[-1])) @ V


def attention(Q, K, V):
    out = np.zeros(Q.shape[:-1] + (V.shape[-1],), dtype=np.int64)
    out[...] = _row(Q, K, V)
    return out
