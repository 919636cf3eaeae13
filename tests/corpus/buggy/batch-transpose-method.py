# Bug: K.transpose() with no axes reverses every axis, not just the last two.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ K.transpose() / np.sqrt(d_k)
    return softmax(scores) @ V
