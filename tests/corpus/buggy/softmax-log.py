# Bug: computes the log-softmax (the stable way) and mixes the values with the log-weights.
import numpy as np


def attention(Q, K, V):
    x = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    x = x - x.max(axis=-1, keepdims=True)
    log_w = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return log_w @ V
