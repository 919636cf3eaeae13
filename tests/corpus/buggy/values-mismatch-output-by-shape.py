# Wrong: keeps each output in a dict keyed by the input shapes and answers later calls from it.
import numpy as np

_seen = {}


def attention(Q, K, V):
    key = (Q.shape, K.shape, V.shape)
    if key not in _seen:
        scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        _seen[key] = (weights / weights.sum(axis=-1, keepdims=True)) @ V
    return _seen[key]
