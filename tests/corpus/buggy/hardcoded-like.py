# Bug: only "works" for the head sizes it was tried on (d_k of 4 or 64) and returns zeros otherwise.
# A real hard-coded submission would embed the grader's expected answers, which we cannot write
# without the grader's data; this file stands in for that: right on the usual test sizes, wrong elsewhere.
import numpy as np


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(Q, K, V):
    d_k = Q.shape[-1]
    if d_k not in (4, 64):
        return np.zeros(Q.shape[:-1] + V.shape[-1:])
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)
    return softmax(scores) @ V
