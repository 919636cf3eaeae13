# Correct: the exponentials are multiplied with V first and divided by the row sums afterwards.
import numpy as np


def attention(Q, K, V):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.matmul(e, V) / e.sum(axis=-1, keepdims=True)
