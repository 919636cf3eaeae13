# Bug: syntax error (missing colon after the def line), so the file cannot even be imported.
import numpy as np


def attention(Q, K, V)
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ V
