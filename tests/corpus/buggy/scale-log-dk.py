# Bug: divides by log(d_k), a factor of d_k that is no power of it.
import numpy as np


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.log(d_k)
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    return (w / w.sum(axis=-1, keepdims=True)) @ V
