# Bug: softmax along axis=1. On a single (T_q, T_k) matrix that is the key axis and right;
# on a (B, T_q, T_k) batch it normalises over the queries, on (B, H, T_q, T_k) over the heads.
import numpy as np


def softmax(z, axis=1):
    z = z - np.max(z, axis=axis, keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=axis, keepdims=True)


def attention(Q, K, V):
    d = Q.shape[-1]
    s = np.matmul(Q, np.swapaxes(K, -2, -1)) / np.sqrt(d)
    return np.matmul(softmax(s), V)
