import numpy as np


def _attend(q, k, v):
    """Attention for a single sequence: q (T_q, d_k), k (T_k, d_k), v (T_k, d_v)."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=1, keepdims=True)
    w = np.exp(scores)
    w = w / w.sum(axis=1, keepdims=True)
    return w @ v


def attention(Q, K, V):
    if Q.ndim == 2:
        return _attend(Q, K, V)
    # peel off one leading (batch or head) axis at a time
    return np.stack([attention(q, k, v) for q, k, v in zip(Q, K, V)])
