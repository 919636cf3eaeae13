"""Two bugs: the scale is 1/d_k instead of 1/sqrt(d_k), and `.T` reverses every axis of a batch."""

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    scores = Q @ K.T / Q.shape[-1]
    return softmax(scores) @ V
