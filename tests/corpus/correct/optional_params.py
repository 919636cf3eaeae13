import numpy as np


def attention(Q, K, V, mask=None, dropout=0.0):
    """mask: boolean array broadcastable to the scores, True = keep.
    dropout: probability of dropping a weight (0.0 = inference, the default)."""
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    if dropout > 0.0:
        keep = np.random.default_rng().random(weights.shape) >= dropout
        weights = weights * keep / (1.0 - dropout)
    return weights @ V
