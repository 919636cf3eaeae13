# Bug: calls sys.exit(0) at import time (left over from a script), so the module never finishes loading.
import sys

import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores) @ V


print(attention(np.eye(2), np.eye(2), np.eye(2)))
sys.exit(0)
