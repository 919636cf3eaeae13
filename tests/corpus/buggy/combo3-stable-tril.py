# Bugs: like the four-mistake file, but the softmax subtracts the row maximum: three mistakes,
# and softmax-unstable must not be named.
import numpy as np


def attention(Q, K, V):
    s = Q @ K.T
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * np.tril(np.ones((s.shape[-2], s.shape[-1])))
    return w @ V
