import numpy as np


def attention(Q, K, V):
    # do everything in single precision, like most GPU code would
    Q = np.asarray(Q, dtype=np.float32)
    K = np.asarray(K, dtype=np.float32)
    V = np.asarray(V, dtype=np.float32)
    scale = np.float32(1.0) / np.sqrt(np.float32(Q.shape[-1]))
    scores = (Q @ K.swapaxes(-1, -2)) * scale
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return (weights @ V).astype(np.float32)
