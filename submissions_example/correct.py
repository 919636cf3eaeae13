"""A correct submission: scaled dot-product attention for any number of leading batch axes."""

import numpy as np


def softmax(x, axis=-1):
    x = x - np.max(x, axis=axis, keepdims=True)  # stable: exp never overflows
    e = np.exp(x)
    return e / np.sum(e, axis=axis, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores, axis=-1) @ V
