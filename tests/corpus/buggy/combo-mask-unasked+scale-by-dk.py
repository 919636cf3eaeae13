# Bugs: an unrequested causal mask, and the scores divided by d_k rather than sqrt(d_k).
import numpy as np


def causal_mask(rows, cols):
    return np.tril(np.ones((rows, cols), dtype=bool))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / Q.shape[-1]
    scores = np.where(causal_mask(Q.shape[-2], K.shape[-2]), scores, -np.inf)
    return softmax(scores) @ V
