# The maximum is taken per column, the normalisation per row.
import numpy as np


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -2, -1) / np.sqrt(Q.shape[-1])
    z = np.exp(scores - scores.max(axis=-2, keepdims=True))
    return (z / z.sum(axis=-1, keepdims=True)) @ V
