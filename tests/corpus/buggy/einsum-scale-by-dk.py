# Bug: einsum for the scores (fine on any batch shape), but divided by d_k, not sqrt(d_k).
import numpy as np


def attention(Q, K, V):
    logits = np.einsum("...qd,...kd->...qk", Q, K) / Q.shape[-1]
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, V)
