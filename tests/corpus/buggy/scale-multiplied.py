# Bug: multiplies the scores by sqrt(d_k) instead of dividing.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) * np.sqrt(d_k)
    return softmax(scores) @ V
