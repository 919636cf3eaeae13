# np.dot for a single sequence and a softmax with no max-shift.
import numpy as np


def attention(Q, K, V):
    d_k = Q.shape[-1]
    e = np.exp(np.dot(Q, K.T) / np.sqrt(d_k))
    return np.dot(e / e.sum(axis=-1, keepdims=True), V)
