# Bugs: no scaling of the scores AND returns the weights instead of weights @ V.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    scores = Q @ np.swapaxes(K, -1, -2)
    return softmax(scores)
