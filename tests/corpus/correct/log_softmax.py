import numpy as np


def log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def attention(Q, K, V):
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
    weights = np.exp(log_softmax(scores, axis=-1))
    return weights @ V
