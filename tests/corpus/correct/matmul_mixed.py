import numpy as np


def attention(Q, K, V):
    scores = np.matmul(Q, K.swapaxes(-2, -1)) / np.sqrt(Q.shape[-1])
    scores = scores - scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(-1, keepdims=True)
    return weights @ V
