# Bug: V is reshaped with d_k, taken from Q, where its own last axis (d_v) belongs: it raises on
# every input whose d_v differs from d_k, and runs where they happen to be equal.
import numpy as np


def attention(Q, K, V):
    d_k = Q.shape[-1]
    q = Q.reshape(-1, Q.shape[-2], d_k)
    k = K.reshape(-1, K.shape[-2], d_k)
    v = V.reshape(-1, V.shape[-2], d_k)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k)
    s = s - s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=-1, keepdims=True)
    return (w @ v).reshape(*Q.shape[:-1], V.shape[-1])
