# Bug: softmax normalises over the whole array instead of each row.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores) @ V
