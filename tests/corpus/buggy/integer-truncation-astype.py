# Bug: casts the scaled scores to int (to "round" them), which truncates every score toward zero.
import numpy as np


def attention(Q, K, V):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
    scores = scores.astype(int)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    return np.matmul(weights, V)
