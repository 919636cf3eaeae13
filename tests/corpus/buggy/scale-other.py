# Bug: divides by d_k ** 0.25 (fourth root) instead of sqrt(d_k).
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / d_k ** 0.25
    return softmax(scores) @ V
