# Bug: the softmax gets the raw dot products; the 1/sqrt(d_k) is applied to its result instead.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    weights = softmax(Q @ np.swapaxes(K, -1, -2)) / np.sqrt(d_k)
    return weights @ V
