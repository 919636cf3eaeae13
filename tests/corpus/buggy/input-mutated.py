# Bug: scales Q in place (Q /= ...), which silently changes the caller's array; the output itself is right.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    Q /= np.sqrt(d_k)
    scores = Q @ np.swapaxes(K, -1, -2)
    return softmax(scores) @ V
