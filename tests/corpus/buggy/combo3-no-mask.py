# Bugs: like the four-mistake file without the mask: three mistakes, and no mask-unasked.
import numpy as np


def attention(Q, K, V):
    s = Q @ K.T
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    return w @ V
