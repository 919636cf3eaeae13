import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2)  # no 1/sqrt(d_k)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return (p @ V).squeeze()
