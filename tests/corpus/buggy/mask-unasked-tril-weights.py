# Bug: zeroes the weights above the diagonal after the softmax (np.tril multiplied in): a causal
# mask no case asks for, and the rows no longer sum to 1.
import numpy as np


def attention(Q, K, V):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return (w * np.tril(np.ones(w.shape[-2:]))) @ V
