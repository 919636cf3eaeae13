# Bug: always applies a causal mask (np.tril), though the task is plain attention with no mask.
import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    keep = np.tril(np.ones(scores.shape[-2:], dtype=bool))
    scores = np.where(keep, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ V
