# Bug: shifts by the maximum of the whole score array instead of each row's. Mathematically the
# same, but on large scores every row far below the global maximum underflows to 0/0 = nan.
import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(scores - np.max(scores))
    return (e / e.sum(axis=-1, keepdims=True)) @ V
