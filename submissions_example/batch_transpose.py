"""Bug: K.T is right for one sequence but reverses every axis of a batched (B, T, d) tensor."""

import numpy as np


def attention(Q, K, V):
    scores = Q @ K.T / np.sqrt(K.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True) @ V
