# Refuses batches outright, and its softmax has no max-shift.
import numpy as np


def attention(Q, K, V):
    if Q.ndim != 2:
        raise ValueError("only a single sequence is supported")
    e = np.exp(Q @ K.T / np.sqrt(Q.shape[1]))
    return (e / e.sum(axis=1, keepdims=True)) @ V
