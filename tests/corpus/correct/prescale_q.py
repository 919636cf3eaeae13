import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    # scale the queries first (a new array, the caller's Q is left alone)
    Q = Q / np.sqrt(Q.shape[-1])
    scores = Q @ K.swapaxes(-1, -2)
    return softmax(scores) @ V
