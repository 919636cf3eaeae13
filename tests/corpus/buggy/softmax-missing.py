# Bug: no softmax at all; the raw scaled scores are multiplied with V.
import numpy as np


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return scores @ V
