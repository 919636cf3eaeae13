# Bug: np.dot(Q, K.T) only works for 2-D inputs; K.T reverses all axes on a batch.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = np.dot(Q, K.T) / np.sqrt(d_k)
    return softmax(scores) @ V
