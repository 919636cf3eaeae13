# Bug: K.transpose(0, 2, 1) is right for one batch axis only; with heads, (B, H, T, d), it raises.
# A single sequence is handled by its own branch, so only the 4-D input fails.
import numpy as np


def attention(Q, K, V):
    if Q.ndim == 2:
        Kt = K.T
    else:
        Kt = K.transpose(0, 2, 1)
    scores = Q @ Kt / np.sqrt(Q.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    w = np.exp(scores)
    w /= w.sum(axis=-1, keepdims=True)
    return w @ V
