# Bug: d_k is written into the code (8) instead of read from the inputs: a reshape raises for any
# other feature size, whatever the rank, and inputs with d_k = 8 run.
import numpy as np

def attention(Q, K, V):
    Q = Q.reshape(-1, Q.shape[-2], 8)
    K = K.reshape(-1, K.shape[-2], 8)
    s = Q @ K.transpose(0, 2, 1) / np.sqrt(8)
    s -= s.max(-1, keepdims=True)
    w = np.exp(s); w /= w.sum(-1, keepdims=True)
    return (w @ V.reshape(-1, *V.shape[-2:])).reshape(*V.shape[:-2], Q.shape[1], V.shape[-1])
