# Bugs: the same four in the np.dot style: np.dot for both products (K.T on a batch), no scale,
# a causal mask on the scores nobody asked for, and exp without subtracting the maximum.
import numpy as np


def attention(Q, K, V):
    scores = np.dot(Q, K.T)
    n, m = scores.shape[-2], scores.shape[-1]
    scores = np.where(np.tril(np.ones((n, m), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores)
    weights = weights / np.sum(weights, axis=-1, keepdims=True)
    return np.dot(weights, V)
