"""The seed's two bugs, returning (output, weights)."""

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    weights = softmax(Q @ K.T / Q.shape[-1])
    return weights @ V, weights
