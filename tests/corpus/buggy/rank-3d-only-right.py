# Written for (B, T, d) only, and right there: a crash on 2-D and 4-D input, nothing else.
import numpy as np


def attention(Q, K, V):
    s = np.matmul(Q, K.transpose(0, 2, 1)) / np.sqrt(Q.shape[-1])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ V
