# Bug: a class with a causal switch that is on by default, so the graded call is masked.
import numpy as np


class CausalSelfAttention:
    def __init__(self, causal=True):
        self.causal = causal

    def __call__(self, Q, K, V):
        scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
        if self.causal:
            n, m = scores.shape[-2:]
            scores[..., ~np.tril(np.ones((n, m), dtype=bool))] = -np.inf
        scores = scores - scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        return np.matmul(p / p.sum(axis=-1, keepdims=True), V)


attention = CausalSelfAttention()
