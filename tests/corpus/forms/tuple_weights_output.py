"""Returns [weights, output]: the other order, as a list."""

import numpy as np


def attention(Q, K, V):
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return [weights, weights @ V]
