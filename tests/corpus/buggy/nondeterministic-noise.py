# Bug: adds a little random noise to the scores "to break ties": every call differs.
import numpy as np

_rng = np.random.default_rng()


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    s = s + 1e-2 * _rng.standard_normal(s.shape)
    s -= s.max(axis=-1, keepdims=True)
    w = np.exp(s)
    return (w / w.sum(axis=-1, keepdims=True)) @ V
