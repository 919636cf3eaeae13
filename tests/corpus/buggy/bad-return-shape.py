# Bug: returns the right numbers flattened to 1-D instead of shape (..., T_q, d_v).
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    out = softmax(scores) @ V
    return out.reshape(-1)
