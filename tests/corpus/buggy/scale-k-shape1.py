# Bug: the scale is read from K.shape[1]: d_k for a single sequence, but T_k for a (B, T, d) batch
# and the number of heads for (B, H, T, d).
import numpy as np


def attention(Q, K, V):
    scale = 1.0 / np.sqrt(K.shape[1])
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) * scale
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.matmul(weights, V)
