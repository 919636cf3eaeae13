# Bug: divides by sqrt of the value dimension V.shape[-1] instead of sqrt(d_k).
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(V.shape[-1])
    return softmax(scores) @ V
