# Bugs: four at once. No 1/sqrt(d_k), no max-shift before exp, K.T (reverses every axis of a
# batch), and a causal mask (np.tril multiplied into the weights) that no case asks for.
import numpy as np


def attention(Q, K, V):
    s = Q @ K.T
    e = np.exp(s)
    w = e / e.sum(axis=-1, keepdims=True)
    w = w * np.tril(np.ones((s.shape[-2], s.shape[-1])))
    return w @ V
