# Bug: divides by a hard-coded 8.0 (sqrt(64)) whatever d_k is.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / 8.0
    return softmax(scores) @ V
