# Bugs: K.T on a batch, and the dot products cast to int before they are scaled.
import numpy as np


def attention(Q, K, V):
    dots = (Q @ K.T).astype(np.int64)
    scores = dots / np.sqrt(Q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ V
