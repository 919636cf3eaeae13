# Bugs: divides by d_k instead of sqrt(d_k) AND uses K.T, which breaks on batched input (the seed's own code).
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    scores = Q @ K.T / Q.shape[-1]
    return softmax(scores) @ V
