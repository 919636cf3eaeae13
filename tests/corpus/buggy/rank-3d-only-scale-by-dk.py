# Written for (B, T, d) only, and divided by d_k instead of sqrt(d_k): a crash on 2-D and 4-D
# input, and the wrong scale on the 3-D input where it runs.
import numpy as np


def attention(Q, K, V):
    s = np.matmul(Q, K.transpose(0, 2, 1)) / Q.shape[-1]
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ V
